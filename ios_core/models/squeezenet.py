"""SqueezeNet with complex bypass, as IOS builds it: 12 blocks, 50 schedule units.

Each fire block is squeeze 1x1 -> (expand 3x3 | expand 1x1) concatenated, plus a
bypass (the block input, or a 1x1 conv with ReLU where the widths differ), summed
by a separate node; every conv has a ReLU (the tail's 1000-wide conv included).
"""

from ..ir import Graph, GraphBuilder, Value


def _fire(b: GraphBuilder, x: Value, squeeze: int, expand: int) -> Value:
    b.block()
    s = b.conv2d([[x]], squeeze)
    e3 = b.conv2d([[s]], expand, (3, 3), padding=(1, 1))
    e1 = b.conv2d([[s]], expand)
    cat = b.identity([[e3], [e1]])
    bypass = x if x.channels == 2 * expand else b.conv2d([[x]], 2 * expand)
    return b.identity([[cat, bypass]])


def _maxpool_block(b: GraphBuilder, x: Value) -> Value:
    b.block()
    return b.pool([[x]], "max", (3, 3), (2, 2))


def squeezenet(image_size: int = 224, seed: int = 0) -> Graph:
    b = GraphBuilder("squeezenet", (3, image_size, image_size))
    b.block()
    v = b.conv2d([[b.x]], 96, (7, 7), (2, 2), (3, 3))
    v = b.pool([[v]], "max", (3, 3), (2, 2))
    v = _fire(b, v, 16, 64)
    v = _fire(b, v, 16, 64)
    v = _fire(b, v, 32, 128)
    v = _maxpool_block(b, v)
    v = _fire(b, v, 32, 128)
    v = _fire(b, v, 48, 192)
    v = _fire(b, v, 48, 192)
    v = _fire(b, v, 64, 256)
    v = _maxpool_block(b, v)
    v = _fire(b, v, 64, 256)
    b.block()
    v = b.conv2d([[v]], 1000)
    b.pool([[v]], "global_avg")
    return b.build(seed)
