"""A small hand-written SVG of log-log panels (no matplotlib on the project's machine): one panel per
quantity, blocks on x, one polyline with dots per series, decade ticks with labels, and a legend."""
import math
from xml.sax.saxutils import escape

COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#7f7f7f"]
PANEL_W, PANEL_H = 460, 340
MARGIN_L, MARGIN_R, MARGIN_T, MARGIN_B = 70, 20, 40, 50
LEGEND_W = 230


def decades(values):
    """The decade range [10^lo, 10^hi] that holds every value."""
    lo = math.floor(math.log10(min(values)))
    hi = math.ceil(math.log10(max(values)))
    return lo, max(hi, lo + 1)


def decade_label(exponent, unit):
    value = 10.0 ** exponent
    if unit == "blocks":
        names = {3: "1K", 4: "10K", 5: "100K", 6: "1M", 7: "10M", 8: "100M", 9: "1G"}
        return names.get(exponent, f"1e{exponent}")
    text = f"{value:g}"
    return f"{text} {unit}"


class Axis:
    """Maps a value to a pixel on a log scale spanning whole decades."""

    def __init__(self, values, start_px, end_px):
        self.lo, self.hi = decades(values)
        self.start_px, self.end_px = start_px, end_px

    def __call__(self, value):
        fraction = (math.log10(value) - self.lo) / (self.hi - self.lo)
        return self.start_px + fraction * (self.end_px - self.start_px)


def minor_grid(x_axis, y_axis, left, right, top, bottom):
    """Faint lines at 2..9 × each decade, so values between decades can be read."""
    parts = []
    for e in range(x_axis.lo, x_axis.hi):
        for m in range(2, 10):
            px = x_axis(m * 10.0 ** e)
            parts.append(f'<line x1="{px:.1f}" y1="{top}" x2="{px:.1f}" y2="{bottom}" stroke="#f2f2f2"/>')
    for e in range(y_axis.lo, y_axis.hi):
        for m in range(2, 10):
            py = y_axis(m * 10.0 ** e)
            parts.append(f'<line x1="{left}" y1="{py:.1f}" x2="{right}" y2="{py:.1f}" stroke="#f2f2f2"/>')
    return parts


def panel(x0, title, unit, series, colour_of):
    """One panel's SVG elements: frame, decade grid and labels, a polyline per series."""
    xs = [x for points in series.values() for x, _ in points]
    ys = [y for points in series.values() for _, y in points]
    left, right = x0 + MARGIN_L, x0 + PANEL_W - MARGIN_R
    top, bottom = MARGIN_T, PANEL_H - MARGIN_B
    x_axis, y_axis = Axis(xs, left, right), Axis(ys, bottom, top)
    parts = [f'<text x="{(left + right) / 2}" y="{top - 14}" text-anchor="middle" font-weight="bold">'
             f'{escape(title)}</text>',
             f'<rect x="{left}" y="{top}" width="{right - left}" height="{bottom - top}" fill="none" stroke="#333"/>']
    parts += minor_grid(x_axis, y_axis, left, right, top, bottom)
    for e in range(x_axis.lo, x_axis.hi + 1):
        px = x_axis(10.0 ** e)
        parts.append(f'<line x1="{px:.1f}" y1="{top}" x2="{px:.1f}" y2="{bottom}" stroke="#ddd"/>')
        parts.append(f'<text x="{px:.1f}" y="{bottom + 16}" text-anchor="middle">{decade_label(e, "blocks")}</text>')
    for e in range(y_axis.lo, y_axis.hi + 1):
        py = y_axis(10.0 ** e)
        parts.append(f'<line x1="{left}" y1="{py:.1f}" x2="{right}" y2="{py:.1f}" stroke="#ddd"/>')
        parts.append(f'<text x="{left - 6}" y="{py + 4:.1f}" text-anchor="end">{decade_label(e, unit)}</text>')
    parts.append(f'<text x="{(left + right) / 2}" y="{bottom + 36}" text-anchor="middle">live blocks in the core</text>')
    for name, points in series.items():
        points = sorted(points)
        colour = colour_of[name]
        coords = " ".join(f"{x_axis(x):.1f},{y_axis(y):.1f}" for x, y in points)
        parts.append(f'<polyline points="{coords}" fill="none" stroke="{colour}" stroke-width="2"/>')
        parts += [f'<circle cx="{x_axis(x):.1f}" cy="{y_axis(y):.1f}" r="3" fill="{colour}"/>' for x, y in points]
    return parts


def legend(x0, names, colour_of):
    parts = []
    for i, name in enumerate(names):
        y = MARGIN_T + 10 + i * 20
        parts.append(f'<line x1="{x0}" y1="{y}" x2="{x0 + 24}" y2="{y}" stroke="{colour_of[name]}" stroke-width="2"/>')
        parts.append(f'<text x="{x0 + 30}" y="{y + 4}">{escape(name)}</text>')
    return parts


def write_loglog_svg(path, title, panels):
    """panels: [(panel title, unit, {series name: [(blocks, value), ...]})]; values must be positive.
    Series with the same name share a colour across panels."""
    names = []
    for _, _, series in panels:
        names += [n for n in series if n not in names]
    colour_of = {name: COLOURS[i % len(COLOURS)] for i, name in enumerate(names)}
    width = PANEL_W * len(panels) + LEGEND_W
    height = max(PANEL_H, MARGIN_T + 20 * len(names) + 20) + 24
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'font-family="sans-serif" font-size="12">',
             f'<rect width="{width}" height="{height}" fill="white"/>',
             f'<text x="10" y="{height - 8}" fill="#555">{escape(title)}</text>']
    for i, (panel_title, unit, series) in enumerate(panels):
        series = {name: points for name, points in series.items() if points}
        if series:
            parts += panel(PANEL_W * i, panel_title, unit, series, colour_of)
    parts += legend(PANEL_W * len(panels) + 10, names, colour_of)
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")
