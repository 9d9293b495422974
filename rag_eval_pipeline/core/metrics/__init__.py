"""The metrics: a registry where each is declared once (registry.py), the built-in ones one file each
(builtin/), the formulas they share (formulas.py), and the engine that scores items with a judge
(scoring.py)."""
