// The IOS dynamic program over one part, compiled. Python's _PartSearch
// (ios_core/schedule/optimizer.py) is the reference implementation: this file follows it
// step by step (the same candidate endings in the same order, the same bounds, the same
// stable sorts and the same floating-point sums), so both give the same schedules, costs
// and counters. What differs is only how fast: states and stage sets are 64-bit masks,
// candidate lists live in flat arrays, and the stage cost of cost models that compose a
// stage from per-unit numbers (analytic, calibrated) is computed here without calling
// back into Python. The GIL is released while searching, so parts run in parallel threads.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

namespace py = pybind11;
using u64 = std::uint64_t;

namespace {

inline int popcount(u64 x) { return __builtin_popcountll(x); }
inline int lowbit_index(u64 x) { return __builtin_ctzll(x); }

inline u64 mix(u64 x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

inline u64 hash_groups(const u64* g, int n, bool merge) {
  u64 h = mix(static_cast<u64>(n) * 2 + (merge ? 1 : 0));
  for (int i = 0; i < n; ++i) h = mix(h ^ g[i]);
  return h;
}

// One DP entry: a cost, an order-free key of the stage set (for keep > 1), the last stage
// (an id in the stage table) and the rank of the entry it extends in the sub-state.
struct Entry {
  double cost;
  u64 key;
  int stage;  // -1: the empty state's sentinel
  int prev;
};

// Stages as flat arrays: groups (unit masks) of each, and its merge flag.
struct GroupList {
  std::vector<u64> pool;
  std::vector<std::uint32_t> off;
  std::vector<std::uint16_t> len;
  std::vector<char> merge;

  void push(const u64* g, int n, bool m) {
    off.push_back(static_cast<std::uint32_t>(pool.size()));
    pool.insert(pool.end(), g, g + n);
    len.push_back(static_cast<std::uint16_t>(n));
    merge.push_back(m);
  }
  const u64* at(size_t k) const { return pool.data() + off[k]; }
  std::vector<u64> groups(size_t k) const { return std::vector<u64>(at(k), at(k) + len[k]); }
  bool same(size_t k, const u64* g, int n) const { return len[k] == n && std::equal(g, g + n, at(k)); }
};

// Every stage whose latency was asked for, in the order asked: its groups (sorted by mask
// value, as Python's tuple(sorted(groups))), merge flag and latency.
struct StageTable : GroupList {
  std::vector<double> latency;
  std::vector<u64> hash;  // hash_groups of each stage: the index key, and the DP entries' order-free key
  std::unordered_multimap<u64, int> index;

  int find(const u64* g, int n, bool m, u64 h) const {
    auto range = index.equal_range(h);
    for (auto it = range.first; it != range.second; ++it)
      if (static_cast<bool>(merge[it->second]) == m && same(it->second, g, n)) return it->second;
    return -1;
  }
  int add(const u64* g, int n, bool m, u64 h, double lat) {
    int id = static_cast<int>(latency.size());
    push(g, n, m);
    latency.push_back(lat);
    hash.push_back(h);
    index.emplace(h, id);
    return id;
  }
};

// A cheap estimate of the work of one state, known before the search: its sinks plus the
// number of root picks the parallel enumeration walks (the product over chains of one plus
// the chain's roots, capped). The progress bar counts this, so the time left follows the
// large states that cost the most rather than the number of states.
double state_work(u64 s, const std::vector<u64>& succs, const std::vector<u64>& desc,
                  const std::vector<std::vector<int>>& chains, int r) {
  double work = 1.0;
  for (u64 x = s; x; x &= x - 1)
    if (!(succs[lowbit_index(x)] & s)) work += 1.0;
  double picks = 1.0;
  for (const auto& chain : chains) {
    int end = 0;
    int len = static_cast<int>(chain.size());
    while (end < len && (s >> chain[end] & 1)) ++end;
    int roots = 0;
    for (int p = std::max(0, end - r); p < end; ++p) {
      int u = chain[p];
      if (popcount((1ULL << u) | (desc[u] & s)) <= r) ++roots;
    }
    picks *= 1.0 + roots;
    if (picks > 1e6) {
      picks = 1e6;
      break;
    }
  }
  return work + (picks > 1.0 ? picks : 0.0);
}

class PartSolver {
 public:
  PartSolver(int n, std::vector<u64> preds, std::vector<u64> succs, std::vector<u64> desc,
             std::vector<std::vector<int>> chains, std::vector<int> keys, int r, int smax, bool corrected,
             bool merge, bool parallel, int keep, std::optional<double> slack, py::function stage_fn,
             std::optional<py::function> unit_fn, double sync_ms, py::function merge_ok, std::optional<py::function> tick,
             long tick_every)
      : n_(n), preds_(std::move(preds)), succs_(std::move(succs)), desc_(std::move(desc)), chains_(std::move(chains)),
        keys_(std::move(keys)), r_(r), smax_(smax), corrected_(corrected), merge_(merge), parallel_(parallel),
        keep_(std::max(1, keep)), slack_(slack), stage_fn_(std::move(stage_fn)), unit_fn_(std::move(unit_fn)),
        sync_ms_(sync_ms), merge_ok_(std::move(merge_ok)), tick_(std::move(tick)), tick_every_(tick_every) {
    if (n_ < 1 || n_ > 64) throw std::invalid_argument("the compiled DP core handles parts of 1 to 64 units");
    unit_lt_.assign(n_, -1.0);
    unit_busy_.assign(n_, 0.0);
    unit_stage_.assign(n_, -1);
    memo_.emplace(0, std::vector<Entry>{Entry{0.0, 0, -1, -1}});
  }

  // Up to keep (cost, [(groups, merge)]) of the whole part, best first.
  std::vector<std::pair<double, std::vector<std::pair<std::vector<u64>, bool>>>> solutions() {
    u64 full = n_ == 64 ? ~0ULL : ((1ULL << n_) - 1);
    {
      py::gil_scoped_release release;
      solve(full);
    }
    std::vector<std::pair<double, std::vector<std::pair<std::vector<u64>, bool>>>> out;
    const std::vector<Entry>& top = memo_.at(full);
    for (int rank = 0; rank < static_cast<int>(top.size()); ++rank) {
      std::vector<std::pair<std::vector<u64>, bool>> stages;
      u64 s = full;
      int rk = rank;
      while (s) {
        const Entry& e = memo_.at(s)[rk];
        std::vector<u64> groups = table_.groups(e.stage);
        for (u64 g : groups) s &= ~g;
        stages.emplace_back(std::move(groups), static_cast<bool>(table_.merge[e.stage]));
        rk = e.prev;
      }
      std::reverse(stages.begin(), stages.end());
      out.emplace_back(top[rank].cost, std::move(stages));
    }
    return out;
  }

  // The stages whose latency the search asked for, in that order (the screen's prefetch list).
  std::vector<std::tuple<std::vector<u64>, bool, double>> evaluated() const {
    std::vector<std::tuple<std::vector<u64>, bool, double>> out;
    for (size_t id = 0; id < table_.latency.size(); ++id)
      out.emplace_back(table_.groups(id), static_cast<bool>(table_.merge[id]), table_.latency[id]);
    return out;
  }

  py::dict stats() const {
    py::dict d;
    d["states"] = states_;
    d["transitions"] = transitions_;
    d["stage_evaluations"] = static_cast<long>(table_.latency.size());
    d["pruned"] = pruned_;
    return d;
  }

 private:
  struct Cand {
    double bound;
    std::uint32_t off;
    std::uint16_t len;
    bool merge;
    const std::vector<Entry>* sub;
  };

  // -- stage costs ------------------------------------------------------------------------
  void unit_numbers(int i) {
    if (unit_lt_[i] >= 0) return;
    py::gil_scoped_acquire acquire;
    auto t = (*unit_fn_)(i).cast<std::pair<double, double>>();
    unit_lt_[i] = t.first;
    unit_busy_[i] = t.second;
  }

  double compute_latency(const u64* g, int n, bool merge) {
    bool merged = merge && popcount(g[0]) > 1;
    std::vector<u64> by_low(g, g + n);  // groups by lowest unit, as the Python reference's Stage
    std::stable_sort(by_low.begin(), by_low.end(), [](u64 a, u64 b) { return (a & -a) < (b & -b); });
    if (unit_fn_ && !merged) {  // the composition rule of the analytic and calibrated models (cost.analytic.compose)
      double longest = 0.0, work = 0.0;
      for (u64 grp : by_low) {
        double t = 0.0;
        for (u64 x = grp; x; x &= x - 1) {
          int i = lowbit_index(x);
          unit_numbers(i);
          t += unit_lt_[i];
          work += unit_busy_[i];
        }
        longest = std::max(longest, t);
      }
      double sync = n > 1 ? sync_ms_ : 0.0;
      return std::max(longest, work) + sync;
    }
    py::gil_scoped_acquire acquire;
    py::list groups;
    for (u64 grp : by_low) {
      py::list units;
      for (u64 x = grp; x; x &= x - 1) units.append(lowbit_index(x));
      groups.append(units);
    }
    return stage_fn_(groups, merged).cast<double>();
  }

  int stage_id(const u64* g, int n, bool merge) {
    u64 h = hash_groups(g, n, merge);
    int id = table_.find(g, n, merge, h);
    if (id >= 0) return id;
    double lat = compute_latency(g, n, merge);
    id = table_.add(g, n, merge, h, lat);
    if (tick_ && tick_every_ > 0 && static_cast<long>(table_.latency.size()) % tick_every_ == 0) {
      py::gil_scoped_acquire acquire;
      (*tick_)(work_);
    }
    return id;
  }

  double unit_latency(int i) {
    if (unit_stage_[i] < 0) {
      u64 g = 1ULL << i;
      unit_stage_[i] = stage_id(&g, 1, false);
    }
    return table_.latency[unit_stage_[i]];
  }

  double lower_bound(const u64* g, int n, bool merge) {
    u64 g0 = g[0];
    if (n == 1 && !(g0 & (g0 - 1))) return unit_latency(lowbit_index(g0));
    double slack = *slack_;
    if (merge) {
      double best = 0.0;
      bool first = true;
      for (u64 x = g0; x; x &= x - 1) {
        double t = unit_latency(lowbit_index(x));
        if (first || t > best) best = t;
        first = false;
      }
      return best * slack;
    }
    double best = 0.0;
    for (int k = 0; k < n; ++k) {
      double t = 0.0;
      for (u64 x = g[k]; x; x &= x - 1) t += unit_latency(lowbit_index(x));
      if (t > best) best = t;
    }
    return best * slack;
  }

  // -- candidate endings -------------------------------------------------------------------
  bool merge_valid(u64 mask) {
    auto it = merge_cache_.find(mask);
    if (it != merge_cache_.end()) return it->second;
    py::gil_scoped_acquire acquire;
    py::list units;
    for (u64 x = mask; x; x &= x - 1) units.append(lowbit_index(x));
    bool ok = merge_ok_(units).cast<bool>();
    merge_cache_.emplace(mask, ok);
    return ok;
  }

  using Endings = GroupList;

  void parallel_dfs(size_t ci, std::vector<u64>& groups, const std::vector<std::vector<u64>>& cands, Endings& out,
                    std::unordered_multimap<u64, std::uint32_t>& seen) {
    if (ci == cands.size()) {
      int n = static_cast<int>(groups.size());
      if (n == 0 || n > smax_) return;
      if (n == 1 && popcount(groups[0]) == 1) return;  // a single unit, already a candidate
      u64 key[64];
      std::copy(groups.begin(), groups.end(), key);
      std::sort(key, key + n);
      u64 h = hash_groups(key, n, false);
      auto range = seen.equal_range(h);
      for (auto it = range.first; it != range.second; ++it) {
        if (out.same(it->second, key, n)) return;
      }
      seen.emplace(h, static_cast<std::uint32_t>(out.len.size()));
      out.push(key, n, false);
      return;
    }
    parallel_dfs(ci + 1, groups, cands, out, seen);  // skip this chain
    for (u64 g : cands[ci]) {
      if (corrected_) {
        std::vector<u64> next;
        next.reserve(groups.size() + 1);
        u64 merged = g;
        for (u64 h : groups) {
          if (h & merged)
            merged |= h;
          else
            next.push_back(h);
        }
        if (popcount(merged) > r_) continue;
        next.push_back(merged);
        parallel_dfs(ci + 1, next, cands, out, seen);
      } else {
        if (static_cast<int>(groups.size()) >= smax_) continue;
        bool overlap = false;
        for (u64 h : groups) overlap |= (g & h) != 0;
        if (overlap) continue;
        groups.push_back(g);
        parallel_dfs(ci + 1, groups, cands, out, seen);
        groups.pop_back();
      }
    }
  }

  void endings(u64 s, Endings& out) {
    std::vector<int> sinks;
    for (u64 x = s; x; x &= x - 1) {
      int i = lowbit_index(x);
      if (!(succs_[i] & s)) sinks.push_back(i);
    }
    for (int i : sinks) {
      u64 g = 1ULL << i;
      out.push(&g, 1, false);
    }
    if (merge_) {
      std::vector<int> order;                // key ids in order of first sink
      std::vector<std::vector<int>> members;  // sinks per key id, same order
      for (int i : sinks) {
        int k = keys_[i];
        if (k < 0) continue;
        auto pos = std::find(order.begin(), order.end(), k);
        if (pos == order.end()) {
          order.push_back(k);
          members.push_back({i});
        } else {
          members[pos - order.begin()].push_back(i);
        }
      }
      for (const auto& mem : members) {
        int m = static_cast<int>(mem.size());
        if (m > 62) throw std::runtime_error("too many mergeable sinks in one state for the compiled DP core");
        for (u64 sub = 1; sub < (1ULL << m); ++sub) {
          if (popcount(sub) < 2) continue;
          u64 mask = 0;
          for (int k = 0; k < m; ++k)
            if (sub >> k & 1) mask |= 1ULL << mem[k];
          if (merge_valid(mask)) out.push(&mask, 1, true);
        }
      }
    }
    if (parallel_) {
      std::vector<std::vector<u64>> cands;
      for (const auto& chain : chains_) {
        int end = 0;
        int len = static_cast<int>(chain.size());
        while (end < len && (s >> chain[end] & 1)) ++end;
        std::vector<u64> roots;
        for (int p = std::max(0, end - r_); p < end; ++p) {
          int u = chain[p];
          u64 g = (1ULL << u) | (desc_[u] & s);
          if (popcount(g) <= r_) roots.push_back(g);
        }
        if (!roots.empty()) cands.push_back(std::move(roots));
      }
      std::unordered_multimap<u64, std::uint32_t> seen;
      std::vector<u64> groups;
      parallel_dfs(0, groups, cands, out, seen);
    }
  }

  // -- the recursion -------------------------------------------------------------------------
  const std::vector<Entry>& solve(u64 s) {
    auto hit = memo_.find(s);
    if (hit != memo_.end()) return hit->second;
    ++states_;
    Endings ends;
    endings(s, ends);
    size_t count = ends.len.size();
    std::vector<Cand> cands;
    cands.reserve(count);
    for (size_t k = 0; k < count; ++k) {
      ++transitions_;
      const u64* g = ends.at(k);
      int n = ends.len[k];
      u64 used = 0;
      for (int j = 0; j < n; ++j) used |= g[j];
      const std::vector<Entry>& sub = solve(s & ~used);
      g = ends.at(k);  // the recursion does not touch this state's list
      double lb = slack_ ? lower_bound(g, n, ends.merge[k]) : 0.0;
      cands.push_back(Cand{sub[0].cost + lb, ends.off[k], static_cast<std::uint16_t>(n),
                           static_cast<bool>(ends.merge[k]), &sub});
    }
    std::stable_sort(cands.begin(), cands.end(), [](const Cand& a, const Cand& b) { return a.bound < b.bound; });
    std::vector<Entry> top;
    for (size_t i = 0; i < cands.size(); ++i) {
      const Cand& c = cands[i];
      if (slack_ && static_cast<int>(top.size()) >= keep_ && c.bound >= top.back().cost) {
        pruned_ += static_cast<long>(cands.size() - i);
        break;
      }
      const u64* g = ends.pool.data() + c.off;  // Cand keeps the offset: candidates are re-sorted
      int id = stage_id(g, c.len, c.merge);
      double lat = table_.latency[id];
      u64 h = table_.hash[id];
      const std::vector<Entry>& sub = *c.sub;
      for (int rank = 0; rank < static_cast<int>(sub.size()); ++rank) {
        double cost = sub[rank].cost + lat;
        if (static_cast<int>(top.size()) >= keep_ && cost >= top.back().cost) break;
        u64 key = sub[rank].key ^ h;
        bool dup = false;
        for (const Entry& t : top) dup |= t.key == key;
        if (dup) continue;
        Entry e{cost, key, id, rank};
        auto pos = std::upper_bound(top.begin(), top.end(), cost, [](double v, const Entry& t) { return v < t.cost; });
        top.insert(pos, e);
        if (static_cast<int>(top.size()) > keep_) top.resize(keep_);
      }
    }
    work_ += state_work(s, succs_, desc_, chains_, r_);
    if (tick_ && tick_every_ > 0 && states_ % 256 == 0) {
      py::gil_scoped_acquire acquire;
      (*tick_)(work_);
    }
    return memo_.emplace(s, std::move(top)).first->second;
  }

  int n_;
  std::vector<u64> preds_, succs_, desc_;
  std::vector<std::vector<int>> chains_;
  std::vector<int> keys_;
  int r_, smax_;
  bool corrected_, merge_, parallel_;
  int keep_;
  std::optional<double> slack_;
  py::function stage_fn_;
  std::optional<py::function> unit_fn_;
  double sync_ms_;
  py::function merge_ok_;
  std::optional<py::function> tick_;
  long tick_every_;
  std::vector<double> unit_lt_, unit_busy_;
  std::vector<int> unit_stage_;
  std::unordered_map<u64, bool> merge_cache_;
  std::unordered_map<u64, std::vector<Entry>> memo_;
  StageTable table_;
  long states_ = 0, transitions_ = 0, pruned_ = 0;
  double work_ = 0.0;
};

// The work of a part's search before it starts: its states (the predecessor-closed subsets
// but the empty one; every one is reached by taking single sinks away) and the sum of their
// state_work, for an honest progress total. (-1, -1) past `limit` states.
std::pair<long, double> part_work(int n, const std::vector<u64>& succs, const std::vector<u64>& desc,
                                  const std::vector<std::vector<int>>& chains, int r, long limit) {
  if (n < 1 || n > 64) throw std::invalid_argument("part_work handles parts of 1 to 64 units");
  py::gil_scoped_release release;
  u64 full = n == 64 ? ~0ULL : ((1ULL << n) - 1);
  std::unordered_map<u64, char> seen;
  std::vector<u64> stack{full};
  seen.emplace(full, 1);
  double work = 0.0;
  while (!stack.empty()) {
    u64 s = stack.back();
    stack.pop_back();
    work += state_work(s, succs, desc, chains, r);
    for (u64 x = s; x; x &= x - 1) {
      int i = lowbit_index(x);
      if (succs[i] & s) continue;
      u64 t = s & ~(1ULL << i);
      if (t && seen.emplace(t, 1).second) {
        if (static_cast<long>(seen.size()) > limit) return {-1, -1.0};
        stack.push_back(t);
      }
    }
  }
  return {static_cast<long>(seen.size()), work};
}

}  // namespace

PYBIND11_MODULE(_dpcore, m) {
  m.doc() = "The IOS dynamic program over one part, compiled (reference: optimizer._PartSearch).";
  py::class_<PartSolver>(m, "PartSolver")
      .def(py::init<int, std::vector<u64>, std::vector<u64>, std::vector<u64>, std::vector<std::vector<int>>,
                    std::vector<int>, int, int, bool, bool, bool, int, std::optional<double>, py::function,
                    std::optional<py::function>, double, py::function, std::optional<py::function>, long>(),
           py::arg("n"), py::arg("preds"), py::arg("succs"), py::arg("desc"), py::arg("chains"), py::arg("keys"),
           py::arg("r"), py::arg("s"), py::arg("corrected"), py::arg("merge"), py::arg("parallel"), py::arg("keep"),
           py::arg("slack"), py::arg("stage_fn"), py::arg("unit_fn"), py::arg("sync_ms"), py::arg("merge_ok"),
           py::arg("tick"), py::arg("tick_every") = 1024)
      .def("solutions", &PartSolver::solutions)
      .def("evaluated", &PartSolver::evaluated)
      .def("stats", &PartSolver::stats);
  m.def("part_work", &part_work, py::arg("n"), py::arg("succs"), py::arg("desc"), py::arg("chains"), py::arg("r"),
        py::arg("limit") = 5000000L);
}
