"""The key bar under the status line: Textual's `Footer`, rebuilt only when the keys it would show change."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer
from textual.widgets._footer import FooterKey


class KeyBar(Footer):
    """Textual's `Footer` removes and mounts all its keys again each time the bindings may have changed: on
    every focus move (twice when Up steps through the transcript) and every state change of a worker. That
    cost 20 to 30 ms of the app's CPU a key press; here the keys are rebuilt once per refresh at most, and only
    when what the active bindings say (key, action, description, enabled, tooltip) differs from what is drawn.

    Each key is also given its compact state before it is mounted. A `FooterKey` starts compact and the footer's
    binding turns that off once it is mounted, and each of those two class changes restyles the key: about
    4 ms of the app's CPU per key, on every rebuild."""

    def __init__(self) -> None:
        super().__init__()
        self._drawn: tuple[object, ...] | None = None
        self._pending = False

    def bindings_changed(self, screen: Screen[object]) -> None:
        """As `Footer.bindings_changed`, with every change before the next refresh drawn by one rebuild."""
        self._bindings_ready = True
        if not screen.app.app_focus:
            return
        if self.is_attached and screen is self.screen and not self._pending:
            self._pending = True
            self.call_after_refresh(self._redraw)

    def compose(self) -> ComposeResult:
        """Footer's keys; each one whose compact state is bound to the footer's starts with it, so mounting it
        changes no class (a key not bound, the palette's, keeps its default)."""
        for widget in super().compose():
            if isinstance(widget, FooterKey) and "compact" in (widget._reactive_connect or {}):
                widget.set_reactive(FooterKey.compact, self.compact)
                widget.set_class(self.compact, "-compact", update=False)
            yield widget

    async def _redraw(self) -> None:
        self._pending = False
        if not self.is_attached:
            return
        shown = self._shown()
        if shown != self._drawn:
            self._drawn = shown
            await self.recompose()

    def _shown(self) -> tuple[object, ...]:
        """What the keys drawn depend on: every active binding as the screen resolves it now."""
        return tuple((key, binding, enabled, tooltip)
                     for key, (_, binding, enabled, tooltip) in self.screen.active_bindings.items())
