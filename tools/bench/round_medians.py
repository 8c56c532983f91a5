"""The figures the compare scripts collect, one line per program and round:
    PROGRAM NAME VALUE UNIT ...
read into {name: {program: [values], "unit": unit}}, and their medians over the rounds."""
import statistics


def read_rounds(path):
    rows = {}
    for line in open(path):
        prog, name, value, unit = line.split()[:4]
        rows.setdefault(name, {}).setdefault(prog, []).append(float(value))
        rows[name]["unit"] = unit
    return rows


def median(rows, name, prog):
    """The median of NAME for PROG over the rounds, or None where it did not run."""
    values = rows.get(name, {}).get(prog)
    return statistics.median(values) if values else None
