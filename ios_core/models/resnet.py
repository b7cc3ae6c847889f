"""ResNet-50 (v1.5: stride on the 3x3) with batch norm folded into the convs: a
chain-like control case where inter-operator parallelism has little to find.

Unlike the original IOS builder (whose bottleneck lost the x4 expansion), this is the
correct architecture: 16 bottlenecks, 2048 output channels, about 4.1 GMACs.
"""

from ..ir import Graph, GraphBuilder, Value


def _bottleneck(b: GraphBuilder, x: Value, width: int, stride: int) -> Value:
    b.block()
    out = 4 * width
    y = b.conv2d([[x]], width)
    y = b.conv2d([[y]], width, (3, 3), (stride, stride), (1, 1))
    y = b.conv2d([[y]], out, act="identity")
    short = x if (x.channels == out and stride == 1) else b.conv2d([[x]], out, stride=(stride, stride),
                                                                     act="identity")
    return b.relu([[y, short]])  # relu of the residual sum, one unit


def resnet50(image_size: int = 224, seed: int = 0) -> Graph:
    b = GraphBuilder("resnet50", (3, image_size, image_size))
    b.block()
    v = b.conv2d([[b.x]], 64, (7, 7), (2, 2), (3, 3))
    v = b.pool([[v]], "max", (3, 3), (2, 2), (1, 1))
    for width, count, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(count):
            v = _bottleneck(b, v, width, stride if i == 0 else 1)
    b.block()
    b.pool([[v]], "global_avg")
    return b.build(seed)
