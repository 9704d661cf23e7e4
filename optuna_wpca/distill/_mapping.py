"""Which teacher layer each student layer learns from."""

from __future__ import annotations

from optuna_wpca._errors import InputError


def layer_mapping(student_layers: int, teacher_layers: int) -> list[int]:
    """0-based teacher layer for each 0-based student layer, evenly spaced, ending on the last.

    Student layer l (1-based) learns from teacher layer ceil(l * T / S): a 6-layer student of a
    12-layer teacher maps 1->2, 2->4, ..., 6->12 (the paper's Appendix F); a student deeper than
    its teacher shares teacher layers.

    Example:
        >>> [j + 1 for j in layer_mapping(6, 12)]
        [2, 4, 6, 8, 10, 12]
        >>> [j + 1 for j in layer_mapping(4, 6)]
        [2, 3, 5, 6]
    """
    if student_layers < 1 or teacher_layers < 1:
        raise InputError(f"layer counts must be >= 1, got student {student_layers}, teacher {teacher_layers}")
    # Exact integer arithmetic: ceil(l * T / S) without float rounding.
    return [-(-(l * teacher_layers) // student_layers) - 1 for l in range(1, student_layers + 1)]


__all__ = ["layer_mapping"]
