"""NASNet-A Large (331x331, filters 168) as IOS builds it: one block split into 25
parts (one per cell), 374 schedule units, output 3360x1x1. No BN, every conv biased,
separable convs without activations, all pools 3x3 with padding 1 (avg pools count
the padding).

Quirks of the original kept on purpose (reproduced, not fixed):
  (a) normal cells leave x_left out of their output concat, so they are 5f wide and
      the final width is 3360, not 4032;
  (b) stem0's third output term is avgpool(c0) + c0 (Cadene's port: + c1), although
      c1 is still built as a node and concatenated;
  (c) stem1 sums its two stride-2 1x1 paths ([[a, b]]) instead of concatenating
      them, so its x_right has f/2 channels;
  (d) first cells build x_left from two identical ReluConv 1x1/2 paths (no pixel
      shift as in the canonical model) and sum sep5(x_right) + sep3(x_right) in c0.
"""

from ..ir import Graph, GraphBuilder, Value


def _branch(b: GraphBuilder, x: Value, out: int, k: int, stride: int, stem: bool = False) -> Value:
    """Two ReluSepConvs; the first keeps the input width (``stem``: goes to ``out``)."""
    pad = (k // 2, k // 2)
    mid = out if stem else x.channels
    y = b.relu_sep_conv([[x]], mid, (k, k), (stride, stride), pad)
    return b.relu_sep_conv([[y]], out, (k, k), (1, 1), pad)


def _pool(b: GraphBuilder, x: Value, kind: str, stride: int) -> Value:
    return b.pool([[x]], kind, (3, 3), (stride, stride), (1, 1))


def _stem0(b: GraphBuilder, x: Value, f: int) -> Value:
    x1 = b.relu_conv([[x]], f)
    c0 = b.identity([[_branch(b, x1, f, 5, 2), _branch(b, x, f, 7, 2, stem=True)]])
    c1 = b.identity([[_pool(b, x1, "max", 2), _branch(b, x, f, 7, 2, stem=True)]])
    c2a, c2b = _pool(b, x1, "avg", 2), _branch(b, x, f, 5, 2, stem=True)
    c3a = _pool(b, c0, "avg", 1)
    c4a, c4b = _branch(b, c0, f, 3, 1), _pool(b, x1, "max", 2)
    return b.identity([[c1], [c2a, c2b], [c3a, c0], [c4a, c4b]])  # quirk (b)


def _stem1(b: GraphBuilder, conv0: Value, s0: Value, f: int) -> Value:
    x_left = b.relu_conv([[s0]], f)
    pa = b.relu_conv([[conv0]], f // 2, stride=(2, 2))
    pb = b.relu_conv([[conv0]], f // 2, stride=(2, 2))
    x_right = b.identity([[pa, pb]])  # quirk (c)
    return _reducing_combine(b, x_left, x_right, f)


def _reducing_combine(b: GraphBuilder, a: Value, c: Value, f: int) -> Value:
    """The stride-2 combinations shared by stem1 and reduction cells: ``a`` feeds the
    pools and the 5x5 branch of c0, ``c`` the 7x7 branches and the 5x5 branch of c2."""
    c0 = b.identity([[_branch(b, a, f, 5, 2), _branch(b, c, f, 7, 2)]])
    c1 = b.identity([[_pool(b, a, "max", 2), _branch(b, c, f, 7, 2)]])
    c2a, c2b = _pool(b, a, "avg", 2), _branch(b, c, f, 5, 2)
    c3a = _pool(b, c0, "avg", 1)
    c4a, c4b = _branch(b, c0, f, 3, 1), _pool(b, a, "max", 2)
    return b.identity([[c1], [c2a, c2b], [c3a, c1], [c4a, c4b]])


def _first(b: GraphBuilder, x: Value, xp: Value, out_left: int, out_right: int) -> Value:
    pa = b.relu_conv([[xp]], out_left, stride=(2, 2))
    pb = b.relu_conv([[xp]], out_left, stride=(2, 2))
    x_left = b.identity([[pa], [pb]])
    x_right = b.relu_conv([[x]], out_right)
    c0a, c0b = _branch(b, x_right, out_right, 5, 1), _branch(b, x_right, out_right, 3, 1)
    c1a, c1b = _branch(b, x_left, out_right, 5, 1), _branch(b, x_left, out_right, 3, 1)
    c2a = _pool(b, x_right, "avg", 1)
    c3a, c3b = _pool(b, x_left, "avg", 1), _pool(b, x_left, "avg", 1)
    c4a = _branch(b, x_right, out_right, 3, 1)
    return b.identity([[x_left], [c0a, c0b], [c1a, c1b], [c2a, x_left], [c3a, c3b], [c4a, x_right]])


def _normal(b: GraphBuilder, x: Value, xp: Value, out_left: int, out_right: int) -> Value:
    x_left = b.relu_conv([[xp]], out_left)
    x_right = b.relu_conv([[x]], out_right)
    c0a, c0b = _branch(b, x_right, out_right, 5, 1), _branch(b, x_left, out_right, 3, 1)
    c1a, c1b = _branch(b, x_left, out_right, 5, 1), _branch(b, x_left, out_right, 3, 1)
    c2a = _pool(b, x_right, "avg", 1)
    c3a, c3b = _pool(b, x_left, "avg", 1), _pool(b, x_left, "avg", 1)
    c4a = _branch(b, x_right, out_right, 3, 1)
    return b.identity([[c0a, c0b], [c1a, c1b], [c2a, x_left], [c3a, c3b], [c4a, x_right]])  # quirk (a)


def _reduction(b: GraphBuilder, x: Value, xp: Value, out_left: int, out_right: int) -> Value:
    x_left = b.relu_conv([[xp]], out_left)
    x_right = b.relu_conv([[x]], out_right)
    return _reducing_combine(b, x_right, x_left, out_right)


def nasnet(image_size: int = 331, stem_filters: int = 96, filters: int = 168, num_normal: int = 5,
           seed: int = 0) -> Graph:
    """Smaller ``image_size``/``filters`` keep the structure for fast tests."""
    b = GraphBuilder("nasnet", (3, image_size, image_size))
    b.block()
    b.part()
    conv0 = b.conv2d([[b.x]], stem_filters, (3, 3), (2, 2), act="identity")
    b.part()
    s0 = _stem0(b, conv0, filters // 4)
    b.part()
    x, xp = _stem1(b, conv0, s0, filters // 2), s0
    for stage in range(3):
        f = filters * 2 ** stage
        if stage:
            b.part()
            x = _reduction(b, x, xp, f, f)
        b.part()
        x, xp = _first(b, x, xp, f // 2, f), x
        for _ in range(num_normal):
            b.part()
            x, xp = _normal(b, x, xp, f, f), x
    b.part()
    v = b.relu([[x]])
    b.part()
    b.pool([[v]], "global_avg")
    return b.build(seed)
