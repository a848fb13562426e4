"""LineageWorkflow with one call that breaks determinism (it reads the clock), as a careless
change might add: tests/test_durability.py shows that replaying in the sandbox refuses it,
while the worker, which runs the lineage outside the sandbox, would let it pass."""

from datetime import datetime

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from domain.lineage import LineageInput, LineageResult
    from workflows.lineage import LineageWorkflow


@workflow.defn(name="LineageWorkflow", sandboxed=False)
class ClockReadingLineage(LineageWorkflow):
    @workflow.run
    async def run(self, inp: LineageInput) -> LineageResult:
        return await super().run(inp)

    def _should_continue_as_new(self) -> bool:
        if datetime.now().year < 2000:  # never true; the read itself is the fault
            return True
        return super()._should_continue_as_new()
