"""The landing plane: trusting a receipt and landing its outputs (SPEC §6, §9, §10, §11).

Owns the receipt verifier (`verify`), apply and its commit, note and archive move (`apply`),
the 3-way merge of a receipt onto a branch that moved and its proof (`merge`), `apply --all` (`batch`),
a new job for one that does not merge (`resubmit`), the history audit (`audit`: one commit;
`auditrange`: a range), its verdicts (`verdict`)
and the commits it and `log` walk (`walk`), the git hooks (`hooks`),
an applyable `verify KEY` and a plain `log` printed from their last output (`fast`), and
`git genjob doctor`'s checks of this machine and clone (`doctor`: it reads every plane).

May import: every plane above (documents, storage, planner, replay, worker) and this package.
"""
