"""A small line plot drawn with QPainter: a few series of (x, y) points, axes with round ticks, a legend, an optional
log scale and dashed horizontal reference lines. Used for the loss curves and the verifier's error per position."""
import math

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPainterPath, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

MAX_DRAWN = 1500                     # points per series actually drawn (a long run is thinned evenly)
LOG_FLOOR = 1e-12


class Series:
    def __init__(self, name: str, color: str, markers: bool = False):
        self.name, self.color, self.markers = name, QColor(color), markers
        self.points: list[tuple[float, float]] = []


class LinePlot(QWidget):
    def __init__(self, x_label: str = "", y_label: str = "", log_y: bool = False, empty_text: str = "",
                 parent=None):
        super().__init__(parent)
        self.x_label, self.y_label, self.log_y, self.empty_text = x_label, y_label, log_y, empty_text
        self.series: list[Series] = []
        self.lines: list[tuple[str, float, str]] = []     # (label, y, colour): dashed reference lines
        self.setMinimumSize(260, 160)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)

    def add_series(self, name: str, color: str, markers: bool = False) -> Series:
        s = Series(name, color, markers)
        self.series.append(s)
        return s

    def clear(self) -> None:
        for s in self.series:
            s.points.clear()
        self.lines.clear()
        self.update()

    # geometry
    def _y(self, v: float) -> float:
        return math.log10(max(v, LOG_FLOOR)) if self.log_y else v

    def _ranges(self):
        pts = [(x, self._y(y)) for s in self.series for x, y in s.points if math.isfinite(y)]
        if not pts:
            return None
        ys = [y for _, y in pts] + [self._y(v) for _, v, _ in self.lines]
        x0, x1 = min(x for x, _ in pts), max(x for x, _ in pts)
        y0, y1 = min(ys), max(ys)
        if x1 == x0:
            x0, x1 = x0 - 1, x1 + 1
        if self.log_y:                   # whole decades, with room above the highest line for its label
            y0, y1 = math.floor(y0 - 0.1), math.ceil(y1 + 0.25)
        else:
            pad = (y1 - y0) * 0.05 or (abs(y0) * 0.1 or 1.0)
            y0, y1 = y0 - pad, y1 + pad
        if y1 == y0:
            y0, y1 = y0 - 1, y1 + 1
        return x0, x1, y0, y1

    def paintEvent(self, event) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        p.fillRect(self.rect(), self.palette().base())
        fm = p.fontMetrics()
        ranges = self._ranges()
        if ranges is None:
            p.setPen(self.palette().placeholderText().color())
            p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, self.empty_text)
            return
        x0, x1, y0, y1 = ranges
        left = fm.horizontalAdvance("0.000e-00") + 10
        plot = QRectF(left, fm.height() + 8, self.width() - left - 12, self.height() - 3 * fm.height() - 16)
        if plot.width() < 20 or plot.height() < 20:
            return

        def to_px(x, y):
            return QPointF(plot.left() + (x - x0) / (x1 - x0) * plot.width(),
                           plot.bottom() - (y - y0) / (y1 - y0) * plot.height())
        text = self.palette().text().color()
        grid = QColor(text)
        grid.setAlpha(40)
        for v in _ticks(y0, y1, self.log_y):
            pt = to_px(x0, v)
            p.setPen(QPen(grid, 1))
            p.drawLine(QPointF(plot.left(), pt.y()), QPointF(plot.right(), pt.y()))
            p.setPen(text)
            label = f"1e{int(v)}" if self.log_y else _fmt(v)
            p.drawText(QRectF(0, pt.y() - fm.height() / 2, left - 6, fm.height()),
                       Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, label)
        for v in _ticks(x0, x1, False):
            pt = to_px(v, y0)
            p.setPen(QPen(grid, 1))
            p.drawLine(QPointF(pt.x(), plot.top()), QPointF(pt.x(), plot.bottom()))
            p.setPen(text)
            p.drawText(QRectF(pt.x() - 40, plot.bottom() + 2, 80, fm.height()), Qt.AlignmentFlag.AlignHCenter,
                       _fmt(v))
        p.setPen(text)
        p.drawRect(plot)
        p.drawText(QRectF(plot.left(), plot.bottom() + fm.height() + 2, plot.width(), fm.height()),
                   Qt.AlignmentFlag.AlignHCenter, self.x_label)
        p.drawText(QRectF(plot.left(), 2, plot.width(), fm.height()), Qt.AlignmentFlag.AlignLeft, self.y_label)
        for label, value, color in self.lines:
            pt = to_px(x0, self._y(value))
            p.setPen(QPen(QColor(color), 1, Qt.PenStyle.DashLine))
            p.drawLine(QPointF(plot.left(), pt.y()), QPointF(plot.right(), pt.y()))
            p.drawText(QRectF(plot.left() + 4, pt.y() - fm.height() - 1, plot.width() - 8, fm.height()),
                       Qt.AlignmentFlag.AlignLeft, label)
        p.setClipRect(plot.adjusted(-4, -4, 4, 4))
        for s in self.series:
            self._draw_series(p, s, to_px)
        p.setClipping(False)
        self._draw_legend(p, plot, fm)

    def _draw_series(self, p: QPainter, s: Series, to_px) -> None:
        pts = [(x, y) for x, y in s.points if math.isfinite(y)]
        if len(pts) > MAX_DRAWN:
            stride = len(pts) / MAX_DRAWN
            pts = [pts[int(i * stride)] for i in range(MAX_DRAWN)] + [pts[-1]]
        if not pts:
            return
        path = QPainterPath(to_px(pts[0][0], self._y(pts[0][1])))
        for x, y in pts[1:]:
            path.lineTo(to_px(x, self._y(y)))
        p.setPen(QPen(s.color, 1.5))
        p.setBrush(Qt.BrushStyle.NoBrush)
        p.drawPath(path)
        if s.markers or len(pts) == 1:
            p.setBrush(s.color)
            for x, y in pts:
                p.drawEllipse(to_px(x, self._y(y)), 2.5, 2.5)

    def _draw_legend(self, p: QPainter, plot: QRectF, fm) -> None:
        names = [s for s in self.series if s.points]
        x = plot.right() - 8
        for s in reversed(names):
            w = fm.horizontalAdvance(s.name)
            x -= w
            p.setPen(self.palette().text().color())
            p.drawText(QPointF(x, plot.top() + fm.ascent() + 4), s.name)
            x -= 18
            p.setPen(QPen(s.color, 3))
            y = plot.top() + fm.height() / 2 + 4
            p.drawLine(QPointF(x, y), QPointF(x + 12, y))
            x -= 12


def _ticks(lo: float, hi: float, log: bool, target: int = 5) -> list[float]:
    if log:
        step = max(1, math.ceil((hi - lo) / target))
        return [float(v) for v in range(math.ceil(lo), math.floor(hi) + 1, step)]
    raw = (hi - lo) / target
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step) + 1)]


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e5 or a < 1e-3:
        return f"{v:.1e}"
    if a >= 100 or float(v).is_integer():
        return f"{v:.0f}"
    return f"{v:.3g}"
