"""Delegation: a chunk of work handed to a child run here or to a peer agent, and its report
read back. It may import every other room; none imports it (`decisions` and `model_work` take
the `Delegator` through protocols of their own, set by the runtime). Read in this order:
`handover` (configuration, ids, the child's budget slice, what the parent reads),
`peer_calls` (the answer and the cancel a peer may need sent again) and `delegator`
(`Delegator`: the model's `delegate` tool, a `delegateTo` item, forwarding and settling).
"""
