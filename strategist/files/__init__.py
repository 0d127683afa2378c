"""The files a user gives strategist, read and validated in one place: the YAML reader, the pydantic
schemas, hardware profiles, anchors files (and the rules files, read by :mod:`strategist.advice.rules`)."""
