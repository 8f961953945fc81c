"""Chat formats: chunks cut from chat templates, presets, answer parsing, the additivity and template checks."""
