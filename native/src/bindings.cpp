// Python bindings for the C-HNSW index (the only file that knows Python).
//
// Every entry point converts and validates its inputs while holding the GIL, then releases the GIL
// for the work itself (build, insert, search, save, load), so Python threads run in parallel.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "chnsw/chnsw.h"
#include "chnsw/paths.h"
#include "chnsw/ppr.h"

namespace py = pybind11;
using chnsw::Index;

namespace {

using FloatArray = py::array_t<float, py::array::c_style | py::array::forcecast>;
using IdArray = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;

struct Matrix {
  FloatArray arr;
  std::size_t rows = 0;
  bool was_1d = false;
  const float* data() const { return arr.data(); }
};

py::array as_numeric_array(py::handle obj, const char* name) {
  if (obj.is_none()) throw py::type_error(std::string(name) + " must be an array of numbers, got None");
  py::array a = py::array::ensure(obj);
  if (!a) throw py::type_error(std::string(name) + " must be an array-like of numbers");
  return a;
}

/// (n, dim) float32, C-contiguous; float64 and integer input is converted.
Matrix as_matrix(py::handle obj, const char* name, std::size_t dim, bool allow_1d) {
  py::array a = as_numeric_array(obj, name);
  const char kind = a.dtype().kind();
  if (kind != 'f' && kind != 'i' && kind != 'u')
    throw py::type_error(std::string(name) + " must have a numeric (float) dtype, got " +
                         std::string(py::str(a.dtype())));
  Matrix m;
  if (a.ndim() == 1 && allow_1d) {
    m.was_1d = true;
    if (static_cast<std::size_t>(a.shape(0)) != dim)
      throw py::value_error(std::string(name) + " has dimension " + std::to_string(a.shape(0)) +
                            " but the index has dim " + std::to_string(dim));
    a = a.reshape({static_cast<py::ssize_t>(1), static_cast<py::ssize_t>(dim)});
  } else if (a.ndim() != 2) {
    throw py::value_error(std::string(name) + " must be a 2-D array of shape (n, " + std::to_string(dim) +
                          ")" + (allow_1d ? " or 1-D of shape (" + std::to_string(dim) + ",)" : std::string()) +
                          ", got " + std::to_string(a.ndim()) + " dimension(s)");
  } else if (static_cast<std::size_t>(a.shape(1)) != dim) {
    throw py::value_error(std::string(name) + " has dimension " + std::to_string(a.shape(1)) +
                          " but the index has dim " + std::to_string(dim));
  }
  m.arr = FloatArray::ensure(a);
  if (!m.arr) throw py::type_error(std::string(name) + " cannot be converted to float32");
  m.rows = static_cast<std::size_t>(m.arr.shape(0));
  return m;
}

/// Optional int64 id vector of length n (check with ids_or_null).
IdArray as_ids(py::handle obj, std::size_t n) {
  if (obj.is_none()) return IdArray(py::ssize_t(0));
  py::array a = as_numeric_array(obj, "ids");
  const char kind = a.dtype().kind();
  if (kind != 'i' && kind != 'u')
    throw py::type_error("ids must be integers (int64), got dtype " + std::string(py::str(a.dtype())));
  if (a.ndim() != 1) throw py::value_error("ids must be a 1-D array");
  if (static_cast<std::size_t>(a.shape(0)) != n)
    throw py::value_error("ids has " + std::to_string(a.shape(0)) + " entries for " + std::to_string(n) + " vectors");
  if (kind == 'u' && a.itemsize() == 8) {
    py::array_t<uint64_t, py::array::c_style | py::array::forcecast> u(a);
    for (py::ssize_t i = 0; i < u.shape(0); ++i)
      if (u.data()[i] > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        throw py::value_error("ids must fit in int64");
  }
  return IdArray::ensure(a);
}

const int64_t* ids_or_null(py::handle given, const IdArray& ids) {
  return given.is_none() ? nullptr : ids.data();
}

std::size_t as_k(py::handle obj) {
  if (!py::isinstance<py::int_>(obj)) throw py::type_error("k must be an int or a list of ints");
  const long long k = obj.cast<long long>();
  if (k <= 0) throw py::value_error("k must be >= 1, got " + std::to_string(k));
  return static_cast<std::size_t>(k);
}

std::size_t as_ef(py::handle obj) {
  if (obj.is_none()) return 0;
  if (!py::isinstance<py::int_>(obj)) throw py::type_error("ef_search must be an int or None (or, for search_all_layers, a list of ints)");
  const long long ef = obj.cast<long long>();
  if (ef <= 0) throw py::value_error("ef_search must be >= 1, got " + std::to_string(ef));
  return static_cast<std::size_t>(ef);
}

std::size_t as_layer(const Index& idx, long long layer) {
  const std::size_t L = idx.num_layers();
  if (L == 0) throw py::index_error("the index has no layers yet: call add_layer first");
  if (layer < 0 || static_cast<std::size_t>(layer) >= L)
    throw py::index_error("layer " + std::to_string(layer) + " out of range: the index has " + std::to_string(L) +
                          " layer(s)");
  return static_cast<std::size_t>(layer);
}

/// os.fspath(p) as a C++ string (bytes paths decoded with os.fsdecode). A NUL byte is refused
/// with ValueError: the C library would silently cut the path there.
std::string as_path(py::handle p) {
  py::module_ os = py::module_::import("os");
  const std::string s = py::str(os.attr("fsdecode")(os.attr("fspath")(p))).cast<std::string>();
  if (s.find('\0') != std::string::npos)
    throw py::value_error("path contains a NUL byte: " + py::repr(p).cast<std::string>());
  return s;
}

chnsw::Metric as_metric(const std::string& s) {
  chnsw::Metric m;
  if (!chnsw::parse_metric(s, m))
    throw py::value_error("unknown metric '" + s + "': expected 'cosine', 'ip' or 'l2'");
  return m;
}

py::tuple search_impl(const Index& idx, py::handle queries, py::handle k_obj, long long layer_in, py::handle ef_obj) {
  const std::size_t k = as_k(k_obj);
  const std::size_t ef = as_ef(ef_obj);
  const std::size_t layer = as_layer(idx, layer_in);
  Matrix q = as_matrix(queries, "queries", idx.dim(), true);
  const std::size_t nq = q.rows;
  py::array_t<int64_t> ids({nq, k});
  py::array_t<float> dist({nq, k});
  int64_t* pi = ids.mutable_data();
  float* pd = dist.mutable_data();
  {
    py::gil_scoped_release rel;
    idx.search(q.data(), nq, k, layer, ef, pi, pd, idx.num_threads());
  }
  if (q.was_1d) return py::make_tuple(ids.reshape({static_cast<py::ssize_t>(k)}), dist.reshape({static_cast<py::ssize_t>(k)}));
  return py::make_tuple(ids, dist);
}

py::list search_all_impl(const Index& idx, py::handle queries, py::handle k_obj, py::handle ef_obj, bool reuse_entry) {
  const std::size_t L = idx.num_layers();
  if (L == 0) throw py::index_error("the index has no layers yet: call add_layer first");
  std::vector<std::size_t> ks;
  if (py::isinstance<py::int_>(k_obj)) {
    ks.assign(L, as_k(k_obj));
  } else if (py::isinstance<py::sequence>(k_obj) && !py::isinstance<py::str>(k_obj)) {
    for (py::handle h : k_obj) ks.push_back(as_k(h));
    if (ks.size() != L)
      throw py::value_error("k has " + std::to_string(ks.size()) + " entries but the index has " + std::to_string(L) +
                            " layers (give one k per layer, position i = layer i)");
  } else {
    throw py::type_error("k must be an int or a list of ints (one per layer)");
  }
  std::vector<std::size_t> efs;
  if (py::isinstance<py::sequence>(ef_obj) && !py::isinstance<py::str>(ef_obj)) {
    for (py::handle h : ef_obj) efs.push_back(as_ef(h));
    if (efs.size() != L)
      throw py::value_error("ef_search has " + std::to_string(efs.size()) + " entries but the index has " +
                            std::to_string(L) + " layers");
  } else {
    const std::size_t ef = as_ef(ef_obj);
    if (ef) efs.assign(L, ef);
  }
  Matrix q = as_matrix(queries, "queries", idx.dim(), true);
  const std::size_t nq = q.rows;
  std::vector<py::array_t<int64_t>> ids;
  std::vector<py::array_t<float>> dists;
  std::vector<int64_t*> pi;
  std::vector<float*> pd;
  for (std::size_t l = 0; l < L; ++l) {
    ids.emplace_back(std::vector<py::ssize_t>{static_cast<py::ssize_t>(nq), static_cast<py::ssize_t>(ks[l])});
    dists.emplace_back(std::vector<py::ssize_t>{static_cast<py::ssize_t>(nq), static_cast<py::ssize_t>(ks[l])});
    pi.push_back(ids.back().mutable_data());
    pd.push_back(dists.back().mutable_data());
  }
  {
    py::gil_scoped_release rel;
    idx.search_all_layers(q.data(), nq, ks, efs, reuse_entry, pi, pd, idx.num_threads());
  }
  py::list out;
  for (std::size_t l = 0; l < L; ++l) {
    if (q.was_1d) {
      out.append(py::make_tuple(ids[l].reshape({static_cast<py::ssize_t>(ks[l])}),
                                dists[l].reshape({static_cast<py::ssize_t>(ks[l])})));
    } else {
      out.append(py::make_tuple(ids[l], dists[l]));
    }
  }
  return out;
}

std::unique_ptr<Index> from_bytes_impl(py::bytes data, bool verify) {
  std::string_view view = data;  // pybind11 >= 2.10: zero-copy view of the bytes object
  py::gil_scoped_release rel;
  return Index::from_bytes(reinterpret_cast<const uint8_t*>(view.data()), view.size(), verify);
}

py::bytes to_bytes_impl(const Index& idx) {
  std::string s;
  {
    py::gil_scoped_release rel;
    s = idx.to_bytes();
  }
  return py::bytes(s);
}

const char* kClassDoc = R"doc(Community-based HNSW (C-HNSW) of ArchRAG: one index over a list of layers.

Source: specs/seed-archrag.md §2 (ArchRAG §3.1.3, §3.2.1, App. A.2; TR Alg. 2).

Layer 0 is the finest (entities), layer L the coarsest (top communities). Every node lives in
exactly one layer. Inside a layer, nodes link to neighbours chosen by the HNSW selection heuristic
(at most 2*M links on layer 0, M above). Every node of layer i >= 1 keeps one down-link to
(approximately) its nearest node of layer i-1. A query walks top-down; each layer's best hit
seeds the search of the layer below.

Parameters
----------
dim : int
    Vector dimension (1..65536).
metric : {"cosine", "ip", "l2"}
    "cosine" normalises vectors on insert and on query and returns 1 - cos; "ip" returns
    1 - <a, b> on raw vectors; "l2" returns the squared Euclidean distance.
M : int, default 16
    Links per node (2..512): up to M above layer 0, 2*M on layer 0.
ef_construction : int, default 200
    Beam width used to find the neighbours and the down-link of an inserted node.
seed : int, default 12345
    Seeds the choice of each layer's fixed entry node; with one thread the index is a pure
    function of (parameters, seed, insertion order).
ef_search : int, default 64
    Default beam width of queries (per call: max(ef_search, k)); also a read/write property.
num_threads : int, default 1
    Threads for batch queries and inserts, clamped to the machine's hardware threads
    (see set_num_threads).
scan_threshold : int, default 1024
    Small layers are scanned exactly (see the scan_threshold property).

Raises
------
ValueError
    dim or ef_construction out of range, M < 2 or M > 512, unknown metric, ef_search,
    num_threads or scan_threshold out of range.

Choices taken for the ambiguities of spec §8
--------------------------------------------
A6  bounded, heuristically pruned link lists (M, 2*M on layer 0), as in the ArchRAG code.
A7  ef_construction / ef_search are exposed; every beam is max(ef, k).
A8  the down-link psi is a plain many-to-one array (down_link(id)).
A9  search_all_layers is TR Alg. 2 (one pass, entry reuse); reuse_entry=False gives the code's
    independent top-down search per layer.
A10 metric is a parameter; "cosine" (inner product of normalised vectors) is the default.
A11 queries enter the top layer at a fixed node drawn with `seed`, or scan it exactly when it has
    at most `scan_threshold` nodes (default 1024, measured in native/README.md); a small layer
    whose results are asked for is scanned exactly too.
A18 Alg. 3 is implemented as the corrected pseudocode of spec §2.5, adapted to bottom-up layer
    addition (see add_layer / add).
A19 single-threaded insertion is deterministic (given insertion order, no shuffle); with
    num_threads > 1 insertion is parallel and not deterministic.

Thread safety: any number of threads may search concurrently; add / add_layer / mark_deleted
may run while others search (readers/writer lock; add releases it every few hundred nodes).
)doc";

using CsrIndptr = py::array_t<int64_t, py::array::c_style>;

/// A graph's CSR offsets, used in place: a contiguous 1-D int64 array of n + 1 >= 1 entries
/// (TypeError / ValueError naming the problem otherwise).
CsrIndptr csr_indptr(const py::array& indptr_obj) {
  if (indptr_obj.ndim() != 1 || indptr_obj.dtype().kind() != 'i' || indptr_obj.itemsize() != 8 ||
      !(indptr_obj.flags() & py::array::c_style))
    throw py::type_error("indptr must be a contiguous 1-D int64 array");
  CsrIndptr indptr = py::reinterpret_borrow<CsrIndptr>(indptr_obj);
  if (indptr.shape(0) < 1) throw py::value_error("indptr must have n + 1 >= 1 entries");
  return indptr;
}

/// Forward-push PPR binding: the graph arrays are used in place (no copy per query: indices
/// int32 or int64, probs float32 or float64), the GIL is released for the push.
py::tuple ppr_push_impl(py::array indptr_obj, py::array indices_obj, py::array probs_obj, py::array seeds_obj,
                        py::array weights_obj, double damping, double epsilon, long long max_pushes,
                        py::object relay_obj) {
  CsrIndptr indptr = csr_indptr(indptr_obj);
  const int64_t n = indptr.shape(0) - 1;
  if (indices_obj.ndim() != 1 || probs_obj.ndim() != 1 || indices_obj.shape(0) != probs_obj.shape(0))
    throw py::value_error("indices and probs must be 1-D arrays of the same length");
  if (!(indices_obj.flags() & py::array::c_style) || !(probs_obj.flags() & py::array::c_style))
    throw py::value_error("indices and probs must be contiguous");
  const int64_t nnz = indices_obj.shape(0);
  if (indptr.data()[n] > nnz || indptr.data()[0] != 0)
    throw py::value_error("indptr does not match indices (indptr[0] must be 0 and indptr[-1] <= len(indices))");
  py::array_t<int64_t, py::array::c_style | py::array::forcecast> seeds(seeds_obj);
  py::array_t<double, py::array::c_style | py::array::forcecast> weights(weights_obj);
  if (seeds.ndim() != 1 || weights.ndim() != 1 || seeds.shape(0) != weights.shape(0))
    throw py::value_error("seeds and weights must be 1-D arrays of the same length");
  const uint8_t* relay = nullptr;
  py::array_t<uint8_t, py::array::c_style | py::array::forcecast> relay_arr;
  if (!relay_obj.is_none()) {
    relay_arr = py::array_t<uint8_t, py::array::c_style | py::array::forcecast>(relay_obj);
    if (relay_arr.ndim() != 1 || relay_arr.shape(0) != n) throw py::value_error("relay must have one flag per node");
    relay = relay_arr.data();
  }
  const char ik = indices_obj.dtype().kind(), pk = probs_obj.dtype().kind();
  const auto isz = indices_obj.itemsize(), psz = probs_obj.itemsize();
  if (ik != 'i' || (isz != 4 && isz != 8)) throw py::type_error("indices must be int32 or int64");
  if (pk != 'f' || (psz != 4 && psz != 8)) throw py::type_error("probs must be float32 or float64");
  chnsw::PushResult res;
  {
    const int64_t* ip = indptr.data();
    const void* idx = indices_obj.data();
    const void* pr = probs_obj.data();
    const int64_t* sd = seeds.data();
    const double* wt = weights.data();
    const int64_t ns = seeds.shape(0);
    py::gil_scoped_release release;
    try {
      if (isz == 4 && psz == 4)
        res = chnsw::ppr_push(n, ip, static_cast<const int32_t*>(idx), static_cast<const float*>(pr), nnz, relay, sd, wt,
                              ns, damping, epsilon, max_pushes);
      else if (isz == 4)
        res = chnsw::ppr_push(n, ip, static_cast<const int32_t*>(idx), static_cast<const double*>(pr), nnz, relay, sd, wt,
                              ns, damping, epsilon, max_pushes);
      else if (psz == 4)
        res = chnsw::ppr_push(n, ip, static_cast<const int64_t*>(idx), static_cast<const float*>(pr), nnz, relay, sd, wt,
                              ns, damping, epsilon, max_pushes);
      else
        res = chnsw::ppr_push(n, ip, static_cast<const int64_t*>(idx), static_cast<const double*>(pr), nnz, relay, sd, wt,
                              ns, damping, epsilon, max_pushes);
    } catch (const std::invalid_argument& e) {
      py::gil_scoped_acquire acquire;
      throw py::value_error(e.what());
    }
  }
  py::array_t<int64_t> nodes(static_cast<py::ssize_t>(res.nodes.size()));
  py::array_t<double> mass(static_cast<py::ssize_t>(res.mass.size()));
  std::copy(res.nodes.begin(), res.nodes.end(), nodes.mutable_data());
  std::copy(res.mass.begin(), res.mass.end(), mass.mutable_data());
  return py::make_tuple(nodes, mass, res.residual, res.pushes, res.edges);
}

/// Bidirectional BFS binding: the graph arrays are used in place, the GIL is released.
py::tuple shortest_path_impl(py::array indptr_obj, py::array indices_obj, long long a, long long b,
                             long long max_visits) {
  CsrIndptr indptr = csr_indptr(indptr_obj);
  const int64_t n = indptr.shape(0) - 1;
  if (indices_obj.ndim() != 1 || !(indices_obj.flags() & py::array::c_style))
    throw py::value_error("indices must be a contiguous 1-D array");
  const int64_t nnz = indices_obj.shape(0);
  if (indptr.data()[0] != 0 || indptr.data()[n] > nnz)
    throw py::value_error("indptr does not match indices (indptr[0] must be 0 and indptr[-1] <= len(indices))");
  const char ik = indices_obj.dtype().kind();
  const auto isz = indices_obj.itemsize();
  if (ik != 'i' || (isz != 4 && isz != 8)) throw py::type_error("indices must be int32 or int64");
  chnsw::PathResult res;
  {
    const int64_t* ip = indptr.data();
    const void* idx = indices_obj.data();
    py::gil_scoped_release release;
    try {
      if (isz == 4)
        res = chnsw::shortest_path(n, ip, static_cast<const int32_t*>(idx), nnz, a, b, max_visits);
      else
        res = chnsw::shortest_path(n, ip, static_cast<const int64_t*>(idx), nnz, a, b, max_visits);
    } catch (const std::invalid_argument& e) {
      py::gil_scoped_acquire acquire;
      throw py::value_error(e.what());
    }
  }
  if (!res.found) return py::make_tuple(py::none(), res.visits, res.exhausted);
  py::array_t<int64_t> path(static_cast<py::ssize_t>(res.path.size()));
  std::copy(res.path.begin(), res.path.end(), path.mutable_data());
  return py::make_tuple(path, res.visits, false);
}

}  // namespace

PYBIND11_MODULE(_chnsw, m) {
  m.doc() = "Compiled core of graphstrata_chnsw (C-HNSW). Use the graphstrata_chnsw package.";

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const chnsw::unknown_id& e) {
      PyErr_SetString(PyExc_KeyError, e.what());
    } catch (const chnsw::io_error& e) {
      PyObject* exc = PyObject_CallFunction(PyExc_OSError, "is", e.error_code(), e.what());
      if (exc) {
        PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc)), exc);
        Py_DECREF(exc);
      }
    }
  });

  m.def("simd_level", [] { return std::string(chnsw::simd_level_name(chnsw::active_simd_level())); },
        "Name of the distance kernels in use: 'avx512', 'avx2', 'neon' or 'scalar'.\n\n"
        "Chosen at import from the CPU (no -march flag is needed at build time); the environment\n"
        "variable GRAPHSTRATA_CHNSW_SIMD=<level> read at import, or set_simd_level(), lowers it.");
  m.def("max_threads", &chnsw::max_threads,
        "Most worker threads an index uses: the machine's hardware threads (std::thread::\n"
        "hardware_concurrency, 1 when unknown). set_num_threads clamps to it.");
  m.def("best_simd_level", [] { return std::string(chnsw::simd_level_name(chnsw::best_supported_simd())); },
        "Best kernel level this CPU supports.");
  m.def(
      "set_simd_level",
      [](const std::string& name) {
        chnsw::SimdLevel l;
        if (!chnsw::parse_simd_level(name, l))
          throw py::value_error("unknown SIMD level '" + name + "': expected 'avx512', 'avx2', 'neon' or 'scalar'");
        return std::string(chnsw::simd_level_name(chnsw::set_simd_level(l)));
      },
      py::arg("level"),
      "Select the distance kernels for every index in this process ('avx512', 'avx2', 'neon',\n"
      "'scalar'). An unsupported level falls back to the best supported one below it. Returns the\n"
      "level now in use. Raises ValueError for an unknown name. Takes effect for operations that\n"
      "start after the call.");

  m.def("shortest_path", &shortest_path_impl, py::arg("indptr"), py::arg("indices"), py::arg("a"), py::arg("b"),
        py::arg("max_visits") = -1,
        "Unweighted shortest path between nodes a and b by bidirectional BFS (HiRAG's bridge paths,\n"
        "specs/seed-hirag.md section 3.1 Eq. 15), in networkx's\n"
        "bidirectional_shortest_path order (same graph, same path), over a symmetric CSR adjacency:\n"
        "indptr int64 (n + 1), indices int32/int64 (nnz). The scan stops at the meeting neighbour.\n\n"
        "max_visits: stop after scanning this many neighbour entries (< 0: no bound).\n\n"
        "Returns (path, visits, exhausted): path an int64 array from a to b, or None when the nodes\n"
        "are disconnected or the budget ran out first (exhausted True); visits the entries scanned.\n"
        "Raises ValueError for endpoints outside [0, n) or a malformed graph (checked as it is read),\n"
        "TypeError for arrays of another dtype.");
  m.def("ppr_push", &ppr_push_impl, py::arg("indptr"), py::arg("indices"), py::arg("probs"), py::arg("seeds"),
        py::arg("weights"), py::arg("damping") = 0.5, py::arg("epsilon") = 1e-6, py::arg("max_pushes") = 1000000,
        py::arg("relay") = py::none(),
        "Personalised PageRank by forward push (Andersen, Chung, Lang 2006) over a CSR out-adjacency.\n\n"
        "indptr int64 (n + 1); indices int32/int64 and probs float32/float64 (nnz; each node's out-edge\n"
        "probabilities sum to 1, or it has none: a dangling node restarts at the seeds); seeds int64 and\n"
        "weights float64 (the reset distribution, normalised here); relay: optional uint8 flags of nodes\n"
        "that hold no mass and pass the walk on without a restart chance. A node is pushed while its\n"
        "residual >= epsilon * max(1, out-degree), at most max_pushes times.\n\n"
        "Returns (nodes int64 ascending, mass float64, residual float, pushes int, edges int): the nodes\n"
        "with mass, their mass, and the residual left, an upper bound on the L1 error of the mass.\n"
        "Raises ValueError / TypeError for bad arguments or a malformed graph (checked as it is read).");

  py::class_<Index>(m, "CHNSW", kClassDoc)
      .def(py::init([](long long dim, const std::string& metric, long long M, long long ef_construction,
                       unsigned long long seed, long long ef_search, long long num_threads, long long scan_threshold) {
             if (dim < 1) throw py::value_error("dim must be >= 1, got " + std::to_string(dim));
             if (M < 2) throw py::value_error("M must be >= 2, got " + std::to_string(M));
             if (ef_construction < 1)
               throw py::value_error("ef_construction must be >= 1, got " + std::to_string(ef_construction));
             if (ef_search < 1) throw py::value_error("ef_search must be >= 1, got " + std::to_string(ef_search));
             if (num_threads < 1) throw py::value_error("num_threads must be >= 1, got " + std::to_string(num_threads));
             if (scan_threshold < 0)
               throw py::value_error("scan_threshold must be >= 0, got " + std::to_string(scan_threshold));
             auto idx = std::make_unique<Index>(static_cast<std::size_t>(dim), as_metric(metric),
                                                static_cast<std::size_t>(M), static_cast<std::size_t>(ef_construction),
                                                static_cast<uint64_t>(seed));
             idx->set_ef_search(static_cast<std::size_t>(ef_search));
             idx->set_num_threads(static_cast<std::size_t>(num_threads));
             idx->set_scan_threshold(static_cast<std::size_t>(scan_threshold));
             return idx;
           }),
           py::arg("dim"), py::arg("metric") = "cosine", py::arg("M") = 16, py::arg("ef_construction") = 200,
           py::kw_only(), py::arg("seed") = 12345, py::arg("ef_search") = 64, py::arg("num_threads") = 1,
           py::arg("scan_threshold") = static_cast<long long>(chnsw::kDefaultScanThreshold))
      .def(
          "add_layer",
          [](Index& self, py::handle vectors, py::handle ids) {
            Matrix v = as_matrix(vectors, "vectors", self.dim(), false);
            if (v.rows == 0) throw py::value_error("vectors is empty: a layer needs at least one vector");
            IdArray id = as_ids(ids, v.rows);
            const int64_t* pid = ids_or_null(ids, id);
            py::gil_scoped_release rel;
            return self.add_layer(v.data(), v.rows, pid, self.num_threads());
          },
          py::arg("vectors"), py::arg("ids") = py::none(),
          R"doc(Add a new top layer and return its index (layers are added bottom-up, 0 first).

vectors : float32 array (n, dim), n >= 1 (float64 / integer input is converted).
ids : int64 array (n,), optional. Unique in the whole index (deleted ids included); -1 is
    reserved. Default: consecutive ids starting at len(index).

Each node is linked inside the new layer (beam ef_construction, HNSW heuristic, M links,
spec §2.5 step 2). For a layer i >= 1 each node also gets its down-link: the nearest node of
layer i-1 found by a beam search (ef_construction) entered at the down-link of the node's
nearest new neighbour (spec §2.1 Eq. 2; replaces the paper's top-down Alg. 3 step 1 because
layers arrive bottom-up). The layer's fixed entry node is drawn with `seed` and inserted first.
Runs on num_threads threads with the GIL released; holds the write lock for the whole call.

Raises ValueError (empty or wrong-dim vectors, NaN/inf, zero vector under cosine, duplicate
or reserved ids, ids length mismatch), TypeError (non-numeric vectors or non-integer ids).)doc")
      .def(
          "add",
          [](Index& self, py::handle vectors, long long layer, py::handle ids) {
            const std::size_t l = as_layer(self, layer);
            Matrix v = as_matrix(vectors, "vectors", self.dim(), false);
            if (v.rows == 0) throw py::value_error("vectors is empty: nothing to add");
            IdArray id = as_ids(ids, v.rows);
            const int64_t* pid = ids_or_null(ids, id);
            py::gil_scoped_release rel;
            self.add(v.data(), v.rows, l, pid, self.num_threads());
          },
          py::arg("vectors"), py::arg("layer"), py::arg("ids") = py::none(),
          R"doc(Insert vectors into an existing layer (incremental insert).

vectors : float32 array (n, dim); layer : int in [0, num_layers); ids : as in add_layer.

Each new node descends from the top (greedy, following down-links), runs a small beam search
(32) in layer+1 and links itself inside `layer` (beam ef_construction, HNSW heuristic, at most
2*M / M links with pruning of the neighbours' lists). Nodes of layer+1 among those 32 whose
down-link is farther than the new node are re-pointed to it (spec App. A.2 update rule);
a new node of a layer >= 1 gets its own down-link by searching the layer below.
The write lock is released every 256*num_threads nodes so concurrent searches make progress;
they see a prefix of the batch, every node of it fully linked.

Raises IndexError (no layers yet, layer out of range), ValueError / TypeError as add_layer.)doc")
      .def("mark_deleted", &Index::mark_deleted, py::arg("id"), py::call_guard<py::gil_scoped_release>(),
           "Mark an id as deleted: it is never returned by a search but still routes queries.\n"
           "Idempotent. The id stays reserved (cannot be re-added). Raises KeyError for an unknown id.")
      .def("unmark_deleted", &Index::unmark_deleted, py::arg("id"), py::call_guard<py::gil_scoped_release>(),
           "Undo mark_deleted. Raises KeyError for an unknown id.")
      .def("is_deleted", &Index::is_deleted, py::arg("id"), py::call_guard<py::gil_scoped_release>(),
           "True if the id was marked deleted. Raises KeyError for an unknown id.")
      .def("__contains__", [](const Index& self, long long id) { return self.contains(id); }, py::arg("id"),
           "True if the id is in the index (deleted or not).")
      .def(
          "search",
          [](const Index& self, py::handle queries, py::handle k, long long layer, py::handle ef) {
            return search_impl(self, queries, k, layer, ef);
          },
          py::arg("queries"), py::arg("k"), py::arg("layer") = 0, py::arg("ef_search") = py::none(),
          R"doc(k nearest live nodes of one layer (v1 Alg. 2, spec §2.3).

queries : float array (q, dim) or (dim,).
k : int >= 1.  layer : int, default 0.  ef_search : int or None (None: the index's ef_search).

Returns (ids, dist): ids int64 (q, k) and dist float32 (q, k), nearest first; for a 1-D query
(dim,) both are 1-D (k,). Distances: cosine / ip 1 - similarity, l2 squared L2. Rows with fewer
than k live nodes are padded with id -1 and distance +inf.

The top layer is scanned if it has <= scan_threshold nodes, else entered at its fixed seeded
node; layers above `layer` are walked greedily (ef = 1) following down-links; `layer` is searched
with a beam of max(ef_search, k), or scanned exactly if it has <= scan_threshold nodes. Queries run on num_threads threads with the GIL released.

Raises ValueError (wrong dim, NaN/inf, zero query under cosine, k <= 0, ef_search <= 0),
IndexError (layer out of range or empty index), TypeError (non-numeric queries).)doc")
      .def(
          "search_all_layers",
          [](const Index& self, py::handle queries, py::handle k, py::handle ef, bool reuse_entry) {
            return search_all_impl(self, queries, k, ef, reuse_entry);
          },
          py::arg("queries"), py::arg("k"), py::arg("ef_search") = py::none(), py::kw_only(),
          py::arg("reuse_entry") = true,
          R"doc(Hierarchical search: the k_i nearest live nodes of every layer in one top-down pass
(TR Alg. 2, spec §2.4).

queries : float array (q, dim) or (dim,).
k : int (same k for every layer) or a list with one k per layer (position i = layer i).
ef_search : int, list of ints (one per layer, position i = layer i) or None (the index's
    ef_search); layer i uses a beam of max(ef_i, k_i).
reuse_entry : keyword, default True. True: layer L is searched from its fixed entry node, then
    layer i-1 is entered at the down-link of the nearest node visited in layer i
    (deleted nodes included, they still route), with the down-links of the next best hits of
    layer i (up to 4 entry points in all) as extra seeds. False: each layer is searched independently
    from the top, like `search` (the ArchRAG code's behaviour, spec A9).
Layers with at most scan_threshold nodes are scanned exactly (and seed the next layer with their
exact nearest node).

Returns a list of (ids, dist) pairs, position i = layer i, shapes (q, k_i) (or (k_i,) for a 1-D
query); padding and distances as in `search`.

Raises ValueError (bad k or ef_search, list length != num_layers, wrong dim, NaN/inf, zero query under
cosine), IndexError (empty index), TypeError (non-numeric queries, bad k type).)doc")
      .def(
          "save",
          [](const Index& self, py::handle path) {
            const std::string p = as_path(path);
            py::gil_scoped_release rel;
            self.save(p);
          },
          py::arg("path"),
          R"doc(Write the index to `path` (str or os.PathLike).

The file is written to a temporary file beside `path`, flushed (fsync) and renamed over `path`,
so a crash never leaves a half-written index. Format (little-endian, see native/README.md):
40-byte header (magic b"\x89GSCHNSW", format version 1, payload size, CRC-32 of the payload,
CRC-32 of the header) followed by the payload. Concurrent searches may continue during save.
Raises OSError if the file cannot be written, ValueError if the path contains a NUL byte.)doc")
      .def_static(
          "load",
          [](py::handle path) {
            const std::string p = as_path(path);
            py::gil_scoped_release rel;
            return Index::load(p);
          },
          py::arg("path"),
          R"doc(Read an index written by save(). Search results are identical to the saved index.

Raises ValueError naming the problem for a truncated, corrupted (checksum mismatch) or foreign
file, an unsupported format version, or an inconsistent payload; OSError (FileNotFoundError,
...) if the file cannot be read, ValueError if the path contains a NUL byte. Never crashes on
malformed input.)doc")
      .def("to_bytes", &to_bytes_impl, "The serialised index (same bytes as a file written by save).")
      .def_static("from_bytes", &from_bytes_impl, py::arg("data"), py::arg("verify_checksum") = true,
                  "Inverse of to_bytes. verify_checksum=False skips only the CRC checks (for fuzzing the\n"
                  "parser); every structural check still runs. Raises ValueError like load().")
      .def(py::pickle([](const Index& self) { return to_bytes_impl(self); },
                      [](py::bytes b) { return from_bytes_impl(b, true); }))
      .def("__len__", &Index::size, py::call_guard<py::gil_scoped_release>(), "Number of nodes in all layers (deleted ones included).")
      .def_property_readonly("num_layers", &Index::num_layers, "Number of layers.")
      .def(
          "layer_size", [](const Index& self, long long layer) { return self.layer_size(as_layer(self, layer)); },
          py::arg("layer"), "Number of nodes in a layer (deleted ones included). Raises IndexError.")
      .def_property_readonly("num_deleted", &Index::num_deleted, "Number of nodes marked deleted.")
      .def_property_readonly("dim", &Index::dim, "Vector dimension.")
      .def_property_readonly(
          "metric", [](const Index& self) { return std::string(chnsw::metric_name(self.metric())); },
          "'cosine', 'ip' or 'l2'.")
      .def_property_readonly("M", &Index::M, "Links per node above layer 0 (2*M on layer 0).")
      .def_property_readonly("ef_construction", &Index::ef_construction, "Beam width used while inserting.")
      .def_property_readonly("seed", &Index::seed, "Seed of the fixed entry nodes.")
      .def_property(
          "ef_search", &Index::ef_search,
          [](Index& self, long long ef) {
            if (ef < 1) throw py::value_error("ef_search must be >= 1, got " + std::to_string(ef));
            self.set_ef_search(static_cast<std::size_t>(ef));
          },
          "Default query beam width (a query uses max(ef_search, k)). Saved with the index.")
      .def("set_ef_search", [](Index& self, long long ef) {
            if (ef < 1) throw py::value_error("ef_search must be >= 1, got " + std::to_string(ef));
            self.set_ef_search(static_cast<std::size_t>(ef));
          }, py::arg("ef"), "Same as setting the ef_search property.")
      .def_property(
          "scan_threshold", &Index::scan_threshold,
          [](Index& self, long long t) {
            if (t < 0) throw py::value_error("scan_threshold must be >= 0, got " + std::to_string(t));
            self.set_scan_threshold(static_cast<std::size_t>(t));
          },
          "A layer with at most this many nodes is scanned exactly when it is the top layer being\n"
          "entered (spec A11) or the layer whose results are asked for (search / search_all_layers);\n"
          "intermediate layers of a descent are always walked greedily. Default 1024; 0 = graph\n"
          "search everywhere (the top layer entered at its fixed seeded node). Saved with the index.")
      .def_property_readonly("num_threads", &Index::num_threads, "Threads used by batch queries and inserts.")
      .def(
          "set_num_threads",
          [](Index& self, long long n) {
            if (n < 1) throw py::value_error("num_threads must be >= 1, got " + std::to_string(n));
            return self.set_num_threads(static_cast<std::size_t>(n));
          },
          py::arg("n"),
          "Run batch queries and inserts on n std::threads (default 1) with the GIL released.\n"
          "n is clamped to the machine's hardware threads (max_threads()); returns the count set.\n"
          "A worker thread the system refuses to start (ulimit, address-space or pids limit) is not an\n"
          "error: the call runs on the threads that did start (one at worst).\n"
          "Single-threaded inserts are deterministic; multi-threaded ones are not. Raises ValueError if n < 1.")
      .def(
          "down_link", [](const Index& self, long long id) { return self.down_link(id); }, py::arg("id"),
          "Id of the node's down-link target in the layer below (its approximate nearest\n"
          "neighbour there, spec Eq. 2), or -1 for a layer-0 node. Raises KeyError.")
      .def(
          "neighbors",
          [](const Index& self, long long id) {
            std::vector<int64_t> v = self.neighbors(id);
            return py::array_t<int64_t>(static_cast<py::ssize_t>(v.size()), v.data());
          },
          py::arg("id"), "int64 array of the node's intra-layer links. Raises KeyError.")
      .def(
          "layer_of", [](const Index& self, long long id) { return self.layer_of(id); }, py::arg("id"),
          "Layer of a node. Raises KeyError.")
      .def(
          "ids_in_layer",
          [](const Index& self, long long layer) {
            std::vector<int64_t> v = self.ids_in_layer(as_layer(self, layer));
            return py::array_t<int64_t>(static_cast<py::ssize_t>(v.size()), v.data());
          },
          py::arg("layer"), "int64 array of a layer's ids in insertion order (deleted included). Raises IndexError.")
      .def(
          "entry_point", [](const Index& self, long long layer) { return self.entry_point(as_layer(self, layer)); },
          py::arg("layer"), "Id of the layer's fixed entry node (drawn with seed). Raises IndexError.")
      .def(
          "get_vectors",
          [](const Index& self, py::handle ids) {
            py::array a = as_numeric_array(ids, "ids");
            if (a.ndim() == 0) a = a.reshape({static_cast<py::ssize_t>(1)});
            const std::size_t n = static_cast<std::size_t>(a.shape(0));
            IdArray id = as_ids(a, n);
            py::array_t<float> out({n, self.dim()});
            float* po = out.mutable_data();
            const int64_t* pid = id.data();
            {
              py::gil_scoped_release rel;
              self.get_vectors(pid, n, po);
            }
            return out;
          },
          py::arg("ids"),
          "float32 (n, dim) stored vectors of the given ids (L2-normalised under cosine). Raises KeyError.")
      .def(
          "vectors_view",
          [](py::object self_obj, py::handle ids) -> py::object {
            Index& self = self_obj.cast<Index&>();
            py::array a = as_numeric_array(ids, "ids");
            if (a.ndim() != 1) throw py::value_error("ids must be a 1-D array of int64 ids");
            const std::size_t n = static_cast<std::size_t>(a.shape(0));
            IdArray id = as_ids(a, n);
            if (n == 0 || self.row_stride() != self.dim()) return py::none();
            const int64_t* pid = id.data();
            int64_t first;
            {
              py::gil_scoped_release rel;
              first = self.pin_run(pid, n);
            }
            if (first < 0) return py::none();
            // the view's base owns a reference to the index (kept alive) and its pin (dropped
            // when numpy frees the last array that shares the buffer)
            auto* owner = new py::object(self_obj);
            py::capsule base(owner, [](void* p) {
              auto* o = static_cast<py::object*>(p);
              o->cast<Index&>().unpin_vectors();
              delete o;
            });
            const auto dim = static_cast<py::ssize_t>(self.dim());
            py::array_t<float> out({static_cast<py::ssize_t>(n), dim},
                                   {dim * static_cast<py::ssize_t>(sizeof(float)), static_cast<py::ssize_t>(sizeof(float))},
                                   self.vector_data(static_cast<uint32_t>(first)), base);
            out.attr("flags").attr("writeable") = false;
            return std::move(out);
          },
          py::arg("ids"),
          R"doc(Read-only zero-copy float32 (n, dim) view of the stored vectors of ids, or None.

ids : int64 array (n,). A view exists when the ids are one run of consecutive nodes in insertion
order (every layer of a fresh build or a loaded file, rows in order) and rows are unpadded (dim
a multiple of the SIMD pad, 16 floats); otherwise None, and get_vectors copies them. The view
shares the index's memory (no second copy of the vectors) and keeps the index alive. While any
view is alive an insert that would grow (reallocate) the vector buffer raises RuntimeError
instead of moving it: insert into a copy (from_bytes(to_bytes())). Raises KeyError for an
unknown id.)doc")
      .def_property_readonly("vector_views", &Index::vector_pins,
                             "Number of live zero-copy views (vectors_view) of the vector buffer.")
      .def("__repr__", [](const Index& self) {
        std::string s = "CHNSW(dim=" + std::to_string(self.dim()) + ", metric='" +
                        chnsw::metric_name(self.metric()) + "', M=" + std::to_string(self.M()) +
                        ", ef_construction=" + std::to_string(self.ef_construction()) + ", layers=[";
        const std::size_t L = self.num_layers();
        for (std::size_t l = 0; l < L; ++l) s += (l ? ", " : "") + std::to_string(self.layer_size(l));
        return s + "])";
      });
}
