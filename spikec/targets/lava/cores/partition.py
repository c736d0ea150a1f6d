"""Pieces onto cores and chips: the greedy per-layer baseline and the METIS partition.

Both place each piece on a core of its own (so both use the same number of cores). The baseline fills chips in
network order, as Lava's own partitioner splits per layer. The plan partitions the piece graph (networkx,
undirected, edge weight = spikes per inference both ways) into the fewest chips that hold the cores with METIS's
k-way partitioner (pymetis), minimising the edge cut, i.e. the inter-chip spikes; a chip METIS left over its
capacity (METIS balances within a tolerance, it does not cap) gives up the pieces whose move costs the fewest
spikes until every chip fits.
"""
import math

from spikec.ir.errors import BadInput

RUNS = tuple((recursive, seed) for recursive in (False, True) for seed in range(2))   # per fill and imbalance


def greedy(n: int, limits) -> list[int]:
    """Chip of each of ``n`` pieces, one core each, in order: chip ``i // cores_per_chip``."""
    return [i // limits.cores_per_chip for i in range(n)]


def _pymetis():
    try:
        import pymetis
    except ImportError as e:
        raise BadInput(f"core placement needs the METIS partitioner (pymetis): {e}",
                       where="spikec.targets.lava.cores",
                       remedy="pip install pymetis==2025.2.2 (a dependency of spikec: reinstall with "
                              "`make venv`)") from e
    return pymetis


def piece_graph(n: int, traffic: dict):
    """The undirected networkx graph of ``n`` pieces, weight = spikes per inference in both directions."""
    import networkx as nx
    g = nx.Graph()
    g.add_nodes_from(range(n))
    for (a, b), w in sorted(traffic.items()):
        if a != b:
            g.add_edge(a, b, weight=g.get_edge_data(a, b, {"weight": 0.0})["weight"] + w)
    return g


def _csr(g) -> tuple[list, list, list]:
    xadj, adjncy, eweights = [0], [], []
    for v in range(g.number_of_nodes()):
        for u in sorted(g.adj[v]):
            adjncy.append(u)
            eweights.append(max(1, round(g.adj[v][u]["weight"])))   # METIS takes positive integers
        xadj.append(len(adjncy))
    return xadj, adjncy, eweights


def _metis(csr, chips: int, targets: list[float], ufactor: int, seed: int, recursive: bool) -> list[int]:
    pymetis = _pymetis()
    xadj, adjncy, eweights = csr
    _, parts = pymetis.part_graph(chips, pymetis.CSRAdjacency(xadj, adjncy), eweights=eweights, tpwgts=targets,
                                  options=pymetis.Options(seed=seed, ufactor=ufactor), recursive=recursive)
    return [int(p) for p in parts]


def _cut(g, chip: list[int]) -> float:
    return sum(d["weight"] for a, b, d in g.edges(data=True) if chip[a] != chip[b])


def _repair(g, chip: list[int], chips: int, capacity: int) -> list[int]:
    """Move pieces off over-full chips, each time the move that loses the fewest cut spikes (ties: lowest
    piece, then lowest chip), until every chip holds at most ``capacity`` pieces."""
    chip = list(chip)
    load = [chip.count(k) for k in range(chips)]
    while max(load) > capacity:
        over = {k for k in range(chips) if load[k] > capacity}
        room = [k for k in range(chips) if load[k] < capacity]
        best = None
        for v in range(len(chip)):
            if chip[v] not in over:
                continue
            to = {}
            for u, d in g.adj[v].items():
                to[chip[u]] = to.get(chip[u], 0.0) + d["weight"]
            for k in room:
                loss = to.get(chip[v], 0.0) - to.get(k, 0.0)
                if best is None or loss < best[0]:
                    best = (loss, v, k)
        _, v, k = best
        load[chip[v]] -= 1
        load[k] += 1
        chip[v] = k
    return chip


def _targets(n: int, chips: int, capacity: int) -> dict:
    """The chip fill METIS aims at: even, or full chips and the rest on the last (as the greedy fill is)."""
    rest = n - capacity * (chips - 1)
    return {"even": [1 / chips] * chips, "full chips": [capacity / n] * (chips - 1) + [rest / n]}


def planned(n: int, traffic: dict, limits) -> tuple[list[int], dict]:
    """Chip of each piece and what the partitioner did. Of a fixed set of METIS runs (k-way and recursive
    bisection; chips filled evenly or full with the rest on the last; imbalance 0.1 %, 3 % or up to the
    chips' spare room; seeds 0 and 1) the one with the fewest inter-chip spikes after the capacity repair is
    kept: the plan is deterministic."""
    chips = max(1, math.ceil(n / limits.cores_per_chip))
    info = {"partitioner": "none: the cores fit one chip", "chips": chips}
    if chips == 1:
        return [0] * n, info
    g = piece_graph(n, traffic)
    csr = _csr(g)
    spare = max(1, math.floor(1000 * (limits.cores_per_chip * chips / n - 1)))
    best, runs = None, 0
    for fill, targets in _targets(n, chips, limits.cores_per_chip).items():
        for ufactor in sorted({1, 30, spare}):
            for recursive, seed in RUNS:
                raw = _metis(csr, chips, targets, ufactor, seed, recursive)
                chip = _repair(g, raw, chips, limits.cores_per_chip)
                cut, runs = _cut(g, chip), runs + 1
                if best is None or cut < best[0]:
                    best = (cut, chip, sum(1 for a, b in zip(raw, chip) if a != b),
                            {"recursive": recursive, "seed": seed, "ufactor": ufactor, "fill": fill})
    _, chip, moved, run = best
    order = {}   # chips numbered by their first piece, in network order (METIS numbers parts arbitrarily)
    for k in chip:
        order.setdefault(k, len(order))
    chip = [order[k] for k in chip]
    info = {"partitioner": f"METIS {'recursive bisection' if run['recursive'] else 'k-way'} (pymetis "
                           f"{_version()}), edge cut = inter-chip spikes per inference",
            "run": run, "runs_tried": runs, "chips": len(order), "pieces_moved_by_capacity_repair": moved}
    return chip, info


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("pymetis")
    except PackageNotFoundError:
        return "unknown version"


def measure(chip: list[int], core: list[int], traffic: dict) -> dict:
    """Spikes per inference that stay on a core, cross between cores of a chip, and cross between chips."""
    intra = inter_core = inter_chip = 0.0
    for (a, b), w in traffic.items():
        if core[a] == core[b]:
            intra += w
        elif chip[a] == chip[b]:
            inter_core += w
        else:
            inter_chip += w
    total = intra + inter_core + inter_chip
    return {"intra_core": round(intra, 3), "inter_core_same_chip": round(inter_core, 3),
            "inter_chip": round(inter_chip, 3), "total": round(total, 3),
            "unit": "spikes per inference (sum over the T steps, mean over the verification samples)"}
