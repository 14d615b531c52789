"""What can be worked out from a spec without an implementation: ``lint``,
a dry run of its scenarios (``dryrun``), the difference between two specs
(``diff``), the edge values of declared limits (``limits``), the races a
spec implies (``races``), the arguments that name a new record
(``naming``) and every state of a small scope explored
(``check``, behind ``conformance check-spec``). Imports every other room of
``statemachines``."""

__all__: list[str] = []
