"""Walks SunSpec devices over Modbus TCP as pysunspec2 walks any device:
scan(), then read() of every model, for each unit id given. Used by the
integration test `modbus_server_models` against sitegate's Modbus server.

    python3 tests/py/walk_sunspec.py HOST PORT UNIT [UNIT ...]

Prints one JSON line a unit: {"unit": u, "models": [[id, addr, L,
implemented points, errors], ...]}, or {"unit": u, "exception": "..."} when
a request failed (a Modbus exception or a timeout). Exits 1 when any did.
"""

import json
import sys

from sunspec2.modbus.client import SunSpecModbusClientDeviceTCP


def implemented(group):
    """Points of a group (and its groups) whose value is not "not implemented"."""
    n = sum(1 for p in group.points.values() if p.value is not None)
    for g in group.groups.values():
        for each in g if isinstance(g, list) else [g]:
            n += implemented(each)
    return n


def walk(host, port, unit):
    d = SunSpecModbusClientDeviceTCP(slave_id=unit, ipaddr=host, ipport=port, timeout=10)
    try:
        # One connection for the scan and the reads.
        d.connect()
        d.scan(connect=False)
        out = []
        for key, models in d.models.items():
            if not isinstance(key, int):
                continue
            for m in models:
                if m.model_def is not None:
                    m.read()
                out.append([m.model_id, m.model_addr, m.model_len, implemented(m), m.error_info.strip()])
        out.sort(key=lambda m: m[1])
        return {"unit": unit, "models": out}
    except Exception as e:  # every failure is reported, none is fatal to the walk of the next unit
        return {"unit": unit, "exception": "%s: %s" % (type(e).__name__, e)}
    finally:
        d.close()


def main():
    host, port = sys.argv[1], int(sys.argv[2])
    failed = False
    for unit in sys.argv[3:]:
        result = walk(host, port, int(unit))
        failed = failed or "exception" in result
        print(json.dumps(result), flush=True)
    sys.exit(1 if failed else 0)


main()
