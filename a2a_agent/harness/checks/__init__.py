"""The plan's steps and every check that decides them. It imports the kernel and the
workspace rooms. Read in this order: `out_of_attempts` (an item that used all its attempts),
`prechecks` (an item's check run before any work), `regressions` (what a re-verification
round found, as records) and `reverify` (running that round), `acceptance` (the plan's own
check, before and after), `publish` (the push to the caller's branch), `seeding` (the
workspace made from the task's source), `facts` (facts an item establishes), `decisions`
(the steps around a pause) and last `plan_harness` (`PlanHarness`: the steps of one plan,
which the engine runs).
"""
