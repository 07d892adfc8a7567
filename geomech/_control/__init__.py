"""Optimal control by discrete mechanics (DMOC): the problem, its transcription, the
interior-point solver and the implicit derivatives (docs/optimal_control.md)."""
