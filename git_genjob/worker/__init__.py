"""The worker plane: the worker side of a job (SPEC §4, §5).

Owns the claim-run-sign loop (`run`; the end of an attempt a stop signal interrupted, `stop`),
the check before each claim (`gate`: a job's limits and its planner's signature), the worker's
configuration resolved before any claim (`options`), the scratch tree a generator sees
(`scratch`), the judgement of what it left there (`judge`: the outputs read back, anything else
named) and the generators themselves (`generators`, which see a scratch directory, the job and a
replay client, never the repository), and the gateway (`gateway`, SPEC §12.1): the one door
from an exec generator to the models (the `http:`/`openai:` generators' calls too, through
`gateway.direct`), its key kept by the worker, each call journaled before the send.
Its events are written by the planner plane's ledger.

May import: the documents, storage, planner and replay planes and this package. Never the
landing plane: a worker never applies.
"""
