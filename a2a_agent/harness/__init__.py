"""The work of a plan as steps; knows nothing of DBOS or A2A.

Five rooms, read in this order, each importing only from the rooms before it (and from
outside the harness: the store, the budget, the model, plans): `workspace` (the disk, git and
the box), `kernel` (what every step uses: the context, keyed effects, pauses, endings),
`checks` (the plan's steps and every check), `model` (the model's turns and tools) and
`delegation` (handing work to a child run or a peer). Inside a room, a module imports only
modules listed before it in its room's docstring. `tests/test_rooms.py` holds the rule.
"""
