"""Layout: a plan given stable names. Owns the layout's records (layout_types.py: slots, planned
servers, the plan a layout realises), naming a plan (layout.py), matching planned instances to
existing slots (slots.py), keeping resized servers that already do their job (resize.py), and the
agent's assignment a slot's servers become (assignment.py).

The lowest room of core/: it imports no other room. Inside it, layout.py imports slots.py and
resize.py, and all three import layout_types.py, never the other way round.
"""
