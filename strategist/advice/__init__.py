"""The advisor (four heuristics, minimality) and the comparison with a model's experts."""
