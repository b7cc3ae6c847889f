import json

import numpy as np
import pytest

from ios_core.ir import Block, Conv, Graph, GraphBuilder, GraphError, Identity, Placeholder, Pool, Value


def small_graph(channels: int = 8) -> Graph:
    b = GraphBuilder("t", (channels, 9, 9))
    x = b.x
    a = b.conv2d([[x]], 8, (3, 3), padding=(1, 1))
    c = b.conv2d([[x]], 8, (1, 1), act="sigmoid")
    d = b.relu_sep_conv([[a, c]], 6, (3, 3), (1, 1), (1, 1))
    b.identity([[d], [Value(a.node, 2, 6)]])
    return b.build(seed=3)


def test_shapes_and_terms():
    g = small_graph()
    assert g.output_shape == (10, 9, 9)  # 6 + a 4-channel slice
    assert g.num_units() == 4
    assert [n.name for n in g.nodes()] == ["0", "1", "2", "3", "4"]


def test_print_is_ios_style():
    text = str(small_graph())
    assert "Sequential(" in text
    assert "[1]Conv2d(0) -> 8x9x9" in text
    assert "[3]ReluSepConv(1+2) -> 6x9x9" in text
    assert "[4]Concat(3,1[2:6]) -> 10x9x9" in text


def test_macs_counts_conv_and_sums():
    b = GraphBuilder("m", (4, 5, 5))
    b.conv2d([[b.x]], 2, (3, 3), padding=(1, 1))
    g = b.build()
    assert g.macs() == 2 * 5 * 5 * (3 * 3 * 4 + 1)
    assert g.flops() == 2 * g.macs()
    assert g.bytes() == (4 * 25 + 2 * 25 + 2 * 4 * 9 + 2) * 4


def test_hash_stable_and_name_free():
    g1, g2 = small_graph(), small_graph()
    assert g1.hash() == g2.hash()
    g3 = Graph.from_dict(json.loads(g1.to_json().replace('"1"', '"x1"').replace('["1",', '["x1",')))
    assert g3.hash() == g1.hash()
    assert small_graph(channels=9).hash() != g1.hash()


def test_json_round_trip_with_weights(tmp_path):
    from ios_core.inputs import seeded_input
    from ios_core.interpreters import reference_forward
    g = small_graph()
    g.to_json(tmp_path / "g.json")
    g.save_weights(tmp_path / "w.npz")
    g2 = Graph.from_json(tmp_path / "g.json")
    assert g2.to_dict() == g.to_dict()
    g2.load_weights(tmp_path / "w.npz")
    x = seeded_input(g, 2)
    np.testing.assert_array_equal(reference_forward(g2, x), reference_forward(g, x))


def test_seeded_weights_reproducible():
    a, b, c = small_graph(), small_graph(), GraphBuilder("t", (8, 9, 9))
    np.testing.assert_array_equal(a.node("1").weight, b.node("1").weight)
    assert a.node("1").weight.dtype == np.float32
    bound = np.sqrt(6 / (8 * 9))  # He-uniform before a ReLU
    w, bias = a.node("1").weight, a.node("1").bias
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.8 * bound
    assert np.abs(bias).max() <= 0.01
    assert not np.array_equal(small_graph().init_weights(1).node("1").weight, a.node("1").weight)
    del c


def _graph(nodes, shape=(4, 5, 5)):
    return Graph("bad", Placeholder(name="0", output_shape=shape), [Block("0", nodes)])


def test_error_channel_mismatch_in_sum():
    a = Conv(name="a", inputs=[[Value("0", 0, 4)]], out_channels=3)
    s = Identity(name="s", inputs=[[Value("a", 0, 3), Value("0", 0, 4)]])
    with pytest.raises(GraphError, match=r"node s: term 0 sums values with different channel counts \(3 vs 4"):
        _graph([a, s])


def test_error_slice_out_of_range():
    s = Identity(name="s", inputs=[[Value("0", 2, 9)]])
    with pytest.raises(GraphError, match=r"node s: slice \[2:9\) of '0' is out of range \(it has 4 channels\)"):
        _graph([s])


def test_error_dangling_input():
    s = Identity(name="s", inputs=[[Value("ghost", 0, 4)]])
    with pytest.raises(GraphError, match="node s: input 'ghost' is not defined before it"):
        _graph([s])


def test_error_cycle():
    a = Identity(name="a", inputs=[[Value("b", 0, 4)]])
    b = Identity(name="b", inputs=[[Value("a", 0, 4)]])
    with pytest.raises(GraphError, match="is part of a cycle"):
        _graph([a, b])


def test_error_dead_end_and_spatial_mismatch():
    a = Conv(name="a", inputs=[[Value("0", 0, 4)]], out_channels=4)
    b = Conv(name="b", inputs=[[Value("0", 0, 4)]], out_channels=4)
    with pytest.raises(GraphError, match="node a: its output is never used"):
        _graph([a, b])
    p = Pool(name="p", inputs=[[Value("0", 0, 4)]], pool_type="max", kernel=2, stride=2)
    s = Identity(name="s", inputs=[[Value("0", 0, 4)], [Value("p", 0, 4)]])
    with pytest.raises(GraphError, match="node s: input 'p' is 2x2 but other inputs are 5x5"):
        _graph([p, s])


def test_error_bad_attributes():
    with pytest.raises(GraphError, match="activation 'swish' is not one of"):
        Conv(name="c", out_channels=1, act="swish")
    with pytest.raises(GraphError, match="pool type 'mean' is not one of"):
        Pool(name="p", pool_type="mean")
    c = Conv(name="c", inputs=[[Value("0", 0, 4)]], out_channels=3, groups=2)
    with pytest.raises(GraphError, match="node c: 4 input and 3 output channels are not divisible by groups=2"):
        _graph([c])


def test_from_dict_rejects_foreign_json():
    with pytest.raises(GraphError, match="not an ios_core graph"):
        Graph.from_dict({"name": "x"})


def test_users_follow_the_mutation_api():
    g = small_graph()  # 1 = conv(x), 2 = conv(x), 3 = sep(1+2), 4 = concat(3, 1[2:6])
    assert [u.name for u in g.users("1")] == ["3", "4"]
    assert [u.name for u in g.users("0")] == ["1", "2"]
    three = g.node("3")
    g.set_inputs(three, [[Value("1", 0, 8)]])  # 3 no longer reads 2; 2 is then a dead end
    assert [u.name for u in g.users("2")] == []
    with pytest.raises(GraphError, match="its output is never used"):
        g.lint()
    g.set_inputs(three, [[Value("1", 0, 8), Value("2", 0, 8)]])
    g.lint()
    with pytest.raises(GraphError, match="node 2: cannot be erased, still read by 3"):
        g.erase(["2"])
    with pytest.raises(GraphError, match="node 4: ends a block"):
        g.erase(["4"])


def test_replace_and_erase_keep_index_users_and_parts():
    g = small_graph()
    g.blocks[0].parts = [["1", "2"], ["3", "4"]]
    g.lint()
    old = g.node("2")
    new = Conv(name="2b", inputs=[[Value("0", 0, 8)]], out_channels=8, kernel=(1, 1), act="sigmoid",
               weight=old.weight, bias=old.bias)
    g.replace_node(old, new)
    assert g.node("2b") is new and [u.name for u in g.users("2b")] == ["3"] and g.users("2") == []
    assert g.node("3").inputs == [[Value("1", 0, 8), Value("2b", 0, 8)]]
    assert g.blocks[0].parts == [["1", "2b"], ["3", "4"]]
    g.lint()
    readers = g.replace_all_uses_with("2b", "1")  # 3 reads 1 twice; 2b is left unread
    assert [r.name for r in readers] == ["3"] and g.users("2b") == []
    g.erase(["2b"])
    assert [n.name for n in g.nodes()] == ["0", "1", "3", "4"] and g.blocks[0].parts == [["1"], ["3", "4"]]
    with pytest.raises(GraphError, match="no node named '2b'"):
        g.node("2b")
    g.lint()


def test_lint_finds_an_input_edited_directly():
    g = small_graph()
    g.node("3").inputs = [[Value("1", 0, 8)]]
    with pytest.raises(GraphError, match=r"node 2: read by \[\] but tracked as read by \['3'\]"):
        g.lint()
