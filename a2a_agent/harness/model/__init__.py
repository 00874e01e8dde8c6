"""The model's turns: what it is shown and the tools it may use. It imports the kernel, the
workspace and the checks rooms (a drafted plan is checked as a plan's items are:
`PreChecks.weak_in_plan`). Read in this order: `prompts` (system prompts and messages),
`repo_context` (what the model is shown of a caller's repository), `tools` (the workspace
tools: files and bash), `asking` (the tools that ask a person) and `model_work`
(`ModelWork`: the model's steps, planning and working an item).
"""
