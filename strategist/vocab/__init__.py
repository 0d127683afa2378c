"""strategist's vocabulary, the bottom layer: the graph types, layouts, meshes and hardware values.
It imports nothing of MindSpore or the search; every other package builds on it."""
