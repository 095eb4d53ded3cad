"""Generation modes: each one module (its inputs, rules, conditioning and loop), all in the table
of `registry.py`."""
