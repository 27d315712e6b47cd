"""A ticket to print: ``ticket_pdf`` draws tickets as a PDF, one page each, with reportlab (a
library made for PDFs: no browser), on A4 or US Letter as the project says.

A page holds what the ticket page shows of it: the product, the event (name, place, dates in
UTC), the item's number, the holder's name, the QR code of the secret and the secret written out
to type in. The QR code is the page's (the same data, level M, four modules of quiet zone),
drawn as vector rectangles 70 mm wide: sharp at any printer's resolution. The text is set in
Bitstream Vera, which reportlab ships, embedded (a subset) so that the page prints the same
everywhere; Vera has no monospaced face there, so the secret is cut in lines of equal length.
Nothing on the page depends on the time it was made (``invariant``): the same ticket renders
to the same bytes.
"""

from datetime import UTC, datetime
from io import BytesIO
from pathlib import Path
from threading import Lock
from typing import NamedTuple

import reportlab
import segno
from reportlab.lib.pagesizes import A4, LETTER
from reportlab.lib.units import mm
from reportlab.lib.utils import simpleSplit
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.ttfonts import TTFont
from reportlab.pdfgen.canvas import Canvas

from tessera.seats.rules import seat_label
from tessera.tickets.repository import TicketPageRow

_FONTS = Path(reportlab.__file__).resolve().parent / "fonts"
REGULAR, BOLD = "TesseraVera", "TesseraVera-Bold"
pdfmetrics.registerFont(TTFont(REGULAR, str(_FONTS / "Vera.ttf")))
pdfmetrics.registerFont(TTFont(BOLD, str(_FONTS / "VeraBd.ttf")))

PAPERS = {"a4": A4, "letter": LETTER}
MARGIN = 20 * mm
QR_SIZE = 70 * mm  # the code with its quiet zone: a phone reads it from arm's length
SECRET_LINE = 36  # characters: 143 in four lines
_RENDERING = Lock()


class PrintedTicket(NamedTuple):
    """One ticket to print: what its page shows and its secret."""

    shown: TicketPageRow
    secret: str


def _when(timestamp: int) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime("%d %B %Y, %H:%M UTC")


def holder_of(shown: TicketPageRow) -> str:
    """The holder's name as the page shows it."""
    return " ".join(n for n in (shown.first_name, shown.last_name) if n) or "No name given"


class _Page:
    """Lines set from the top of a page down, wrapped to its width."""

    def __init__(self, canvas: Canvas, width: float, height: float) -> None:
        self.canvas = canvas
        self.width = width
        self.y = height - MARGIN

    def text(self, line: str, *, font: str = REGULAR, size: float = 11, most: int = 3) -> None:
        """``line`` wrapped to the page's width, at most ``most`` lines (the rest cut)."""
        lines = simpleSplit(line, font, size, self.width - 2 * MARGIN) or [""]
        if len(lines) > most:
            lines = [*lines[: most - 1], lines[most - 1].rstrip() + " …"]
        for one in lines:
            self.y -= size * 1.25
            self.canvas.setFont(font, size)
            self.canvas.drawString(MARGIN, self.y, one)

    def gap(self, points: float) -> None:
        self.y -= points

    def qr(self, secret: str) -> None:
        """The secret's QR code, centred, as one path of a rectangle per run of dark modules
        in a row (one fill: no seam between neighbours when rasterised)."""
        code = segno.make(secret, error="m", micro=False)
        rows = [list(row) for row in code.matrix_iter(scale=1, border=4)]
        module = QR_SIZE / len(rows)
        left, top = (self.width - QR_SIZE) / 2, self.y
        path = self.canvas.beginPath()
        for r, row in enumerate(rows):
            start = None
            for c, dark in enumerate([*row, False]):
                if dark and start is None:
                    start = c
                elif not dark and start is not None:
                    y = top - (r + 1) * module
                    path.rect(left + start * module, y, (c - start) * module, module)
                    start = None
        self.canvas.setFillColorRGB(0, 0, 0)
        self.canvas.drawPath(path, stroke=0, fill=1)
        self.y -= QR_SIZE

    def secret(self, secret: str) -> None:
        """The secret in lines of ``SECRET_LINE`` characters, centred under the code."""
        self.y -= 9 * 1.4
        self.canvas.setFont(REGULAR, 9)
        middle = self.width / 2
        self.canvas.drawCentredString(middle, self.y, "If the code cannot be scanned, type in:")
        size = 10.0
        self.canvas.setFont(BOLD, size)
        for at in range(0, len(secret), SECRET_LINE):
            self.y -= size * 1.4
            self.canvas.drawCentredString(middle, self.y, secret[at : at + SECRET_LINE])


def _draw(canvas: Canvas, ticket: PrintedTicket, width: float, height: float) -> None:
    shown = ticket.shown
    page = _Page(canvas, width, height)
    page.text(f"{shown.product_type.capitalize()} ticket", size=10)
    page.text(shown.product_name, font=BOLD, size=20, most=2)
    page.gap(4 * mm)
    if shown.event_name is not None:
        page.text(shown.event_name, font=BOLD, size=14, most=2)
        place = ", ".join(p for p in (shown.event_location, shown.event_address) if p)
        if place:
            page.text(place)
        if shown.event_start_date is not None and shown.event_end_date is not None:
            page.text(f"{_when(shown.event_start_date)} \N{EN DASH} {_when(shown.event_end_date)}")
        page.gap(4 * mm)
    page.text(f"Item #{shown.item_id}", font=BOLD, size=12)
    page.text(f"Holder: {holder_of(shown)}", size=12, most=2)
    if (seat := seat_label(shown)) is not None:
        page.text(f"Seat: {seat}", font=BOLD, size=12, most=2)
    page.gap(8 * mm)
    page.qr(ticket.secret)
    page.gap(2 * mm)
    page.secret(ticket.secret)
    page.gap(6 * mm)
    page.text(
        "Show this code at the door. Keep it to yourself: whoever has it can use this ticket.",
        size=9,
    )


def ticket_pdf(tickets: list[PrintedTicket], paper: str) -> bytes:
    """The tickets as a PDF, one page each, on ``paper`` ("a4" or "letter")."""
    # One at a time: reportlab keeps each embedded font's subsets in the font, which every
    # document shares (callers render in a thread, off the event loop).
    with _RENDERING:
        return _render(tickets, paper)


def _render(tickets: list[PrintedTicket], paper: str) -> bytes:
    width, height = PAPERS[paper]
    out = BytesIO()
    canvas = Canvas(
        out,
        pagesize=(width, height),
        invariant=True,
        initialFontName=REGULAR,  # else the page's preamble names Helvetica, not embedded
        initialFontSize=11,
    )
    one = tickets[0].shown.product_name if len(tickets) == 1 else None
    canvas.setTitle(f"Ticket: {one}" if one is not None else "Tickets")
    canvas.setAuthor("Tessera")
    canvas.setCreator("Tessera")
    for ticket in tickets:
        _draw(canvas, ticket, width, height)
        canvas.showPage()
    canvas.save()
    return out.getvalue()
