"""The step kernel: what every step uses, whichever room it is in. It imports only the
workspace room. Read in this order: `results` (`StepResult`, what every step returns), `keys`
(the one function that makes idempotency keys), `evidence` (an attempt's evidence and the
item's history), `attempts` (an attempt's time left; its work ending and its verification
next), `report` and `render` (the report, plan.json and progress.md from rows), `integrity`
(a workspace checked, or restored from checkpoints), `outputs` (the diff, bundle and files a
run hands back), `context` (`StepContext`: the stores, the workspace, recording a step),
`pauses` (asking a person), `fact_checks` (a fact's check run), `endings` (`RunEndings`:
every way a run ends) and `effects` (`Effects.run`: the one keyed-effect sequence).
"""
