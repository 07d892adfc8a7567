"""Ready-made systems from the seeds. Each returns a `LagrangianSystem`; parameters are fields."""

from ._pendulum import CartesianPendulum as CartesianPendulum
from ._thesis import ThesisExample2 as ThesisExample2
