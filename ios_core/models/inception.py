"""Inception V3 as IOS builds it: torchvision's layout without BN, aux and FC heads;
every conv has a bias and a ReLU; 13 blocks, 119 schedule units, about 5.7 GMACs."""

from ..ir import Graph, GraphBuilder, Value


def _a(b: GraphBuilder, x: Value, pool_features: int) -> Value:
    b.block()
    b1 = b.conv2d([[x]], 64)
    b5 = b.conv2d([[b.conv2d([[x]], 48)]], 64, (5, 5), padding=(2, 2))
    d = b.conv2d([[x]], 64)
    d = b.conv2d([[d]], 96, (3, 3), padding=(1, 1))
    d = b.conv2d([[d]], 96, (3, 3), padding=(1, 1))
    p = b.pool([[x]], "avg", (3, 3), (1, 1), (1, 1))
    p = b.conv2d([[p]], pool_features)
    return b.identity([[b1], [b5], [d], [p]])


def _b(b: GraphBuilder, x: Value) -> Value:
    b.block()
    b3 = b.conv2d([[x]], 384, (3, 3), (2, 2))
    d = b.conv2d([[x]], 64)
    d = b.conv2d([[d]], 96, (3, 3), padding=(1, 1))
    d = b.conv2d([[d]], 96, (3, 3), (2, 2))
    p = b.pool([[x]], "max", (3, 3), (2, 2))
    return b.identity([[b3], [d], [p]])


def _c(b: GraphBuilder, x: Value, c7: int) -> Value:
    b.block()
    b1 = b.conv2d([[x]], 192)
    s = b.conv2d([[x]], c7)
    s = b.conv2d([[s]], c7, (1, 7), padding=(0, 3))
    s = b.conv2d([[s]], 192, (7, 1), padding=(3, 0))
    d = b.conv2d([[x]], c7)
    d = b.conv2d([[d]], c7, (7, 1), padding=(3, 0))
    d = b.conv2d([[d]], c7, (1, 7), padding=(0, 3))
    d = b.conv2d([[d]], c7, (7, 1), padding=(3, 0))
    d = b.conv2d([[d]], 192, (1, 7), padding=(0, 3))
    p = b.pool([[x]], "avg", (3, 3), (1, 1), (1, 1))
    p = b.conv2d([[p]], 192)
    return b.identity([[b1], [s], [d], [p]])


def _d(b: GraphBuilder, x: Value) -> Value:
    b.block()
    b3 = b.conv2d([[b.conv2d([[x]], 192)]], 320, (3, 3), (2, 2))
    s = b.conv2d([[x]], 192)
    s = b.conv2d([[s]], 192, (1, 7), padding=(0, 3))
    s = b.conv2d([[s]], 192, (7, 1), padding=(3, 0))
    s = b.conv2d([[s]], 192, (3, 3), (2, 2))
    p = b.pool([[x]], "max", (3, 3), (2, 2))
    return b.identity([[b3], [s], [p]])


def _e(b: GraphBuilder, x: Value) -> Value:
    b.block()
    b1 = b.conv2d([[x]], 320)
    m = b.conv2d([[x]], 384)
    m1 = b.conv2d([[m]], 384, (1, 3), padding=(0, 1))
    m2 = b.conv2d([[m]], 384, (3, 1), padding=(1, 0))
    d = b.conv2d([[x]], 448)
    d = b.conv2d([[d]], 384, (3, 3), padding=(1, 1))
    d1 = b.conv2d([[d]], 384, (1, 3), padding=(0, 1))
    d2 = b.conv2d([[d]], 384, (3, 1), padding=(1, 0))
    p = b.pool([[x]], "avg", (3, 3), (1, 1), (1, 1))
    p = b.conv2d([[p]], 192)
    return b.identity([[b1], [m1], [m2], [d1], [d2], [p]])


def inception_v3(image_size: int = 299, seed: int = 0) -> Graph:
    """``image_size`` below 299 (>= 75) keeps the structure for fast tests."""
    b = GraphBuilder("inception_v3", (3, image_size, image_size))
    b.block()
    v = b.conv2d([[b.x]], 32, (3, 3), (2, 2))
    v = b.conv2d([[v]], 32, (3, 3))
    v = b.conv2d([[v]], 64, (3, 3), padding=(1, 1))
    v = b.pool([[v]], "max", (3, 3), (2, 2))
    v = b.conv2d([[v]], 80)
    v = b.conv2d([[v]], 192, (3, 3))
    v = b.pool([[v]], "max", (3, 3), (2, 2))
    for pf in (32, 64, 64):
        v = _a(b, v, pf)
    v = _b(b, v)
    for c7 in (128, 160, 160, 192):
        v = _c(b, v, c7)
    v = _d(b, v)
    v = _e(b, v)
    v = _e(b, v)
    b.block()
    b.pool([[v]], "global_avg")
    return b.build(seed)
