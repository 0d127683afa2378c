"""Reports: text, Markdown and JSON of plans and advice."""
