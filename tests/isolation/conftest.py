"""The isolation cases reuse the fault matrix's processes and the target tests' servers."""

from tests.faults.conftest import procs
from tests.targets.conftest import aws_env, elasticmq

__all__ = ["aws_env", "elasticmq", "procs"]
