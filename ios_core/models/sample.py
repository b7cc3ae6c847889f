"""The IOS README demo network: three convs reading one input, a fourth on the
first, and a concat."""

from ..ir import Graph, GraphBuilder


def sample(channels: int = 375, size: int = 15, seed: int = 0) -> Graph:
    b = GraphBuilder("sample", (channels, size, size))
    v = b.x
    v1 = b.conv2d([[v]], channels, (3, 3), padding=(1, 1))
    v2 = b.conv2d([[v]], 2 * channels, (3, 3), padding=(1, 1))
    v3 = b.conv2d([[v]], channels, (3, 3), padding=(1, 1))
    v1 = b.conv2d([[v1]], 2 * channels, (3, 3), padding=(1, 1))
    b.identity([[v1], [v2], [v3]])
    return b.build(seed)
