"""``with obj:`` for objects that hold a resource (a node process, a converter)."""

from __future__ import annotations

from types import TracebackType
from typing import Self


class Closing:
    """``with obj:`` calls ``obj.close()`` on the way out (converters, the featuriser)."""

    def close(self) -> None:
        """Release what the object holds (nothing by default)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
