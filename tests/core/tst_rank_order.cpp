// Megatron's rank order (core/rank_order.h): tensor-parallel rank fastest,
// then data-parallel, then pipeline, checked against the example in
// Megatron-LM's parallel_state.initialize_model_parallel (16 GPUs, tp 2,
// pp 4, dp 2) and round-tripped over a few shapes.

#include <QtTest>
#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "core/rank_order.h"

using cs::RankCoordinates;
using cs::RankOrder;

namespace {

using Groups = std::vector<std::vector<int>>;

// The ranks of each group, by the group number `group_of` gives them.
template <class GroupOf>
Groups groups_of(const RankOrder& order, GroupOf group_of) {
  std::map<int, std::vector<int>> by;
  for (int r = 0; r < order.world_size(); ++r)
    by[group_of(order.coordinates(r))].push_back(r);
  Groups out;
  for (const auto& [group, ranks] : by)
    out.push_back(ranks);
  return out;
}

}  // namespace

class TestRankOrder : public QObject {
  Q_OBJECT

 private slots:
  void coordinates_data();
  void coordinates();
  void roundTrip_data();
  void roundTrip();
  void megatronGroups();
};

void TestRankOrder::coordinates_data() {
  QTest::addColumn<int>("dp");
  QTest::addColumn<int>("tp");
  QTest::addColumn<int>("pp");
  QTest::addColumn<int>("rank");
  QTest::addColumn<int>("dp_rank");
  QTest::addColumn<int>("tp_rank");
  QTest::addColumn<int>("pp_rank");
  QTest::addRow("one rank") << 1 << 1 << 1 << 0 << 0 << 0 << 0;
  QTest::addRow("dp 4, rank 3") << 4 << 1 << 1 << 3 << 3 << 0 << 0;
  QTest::addRow("tp 4, rank 3") << 1 << 4 << 1 << 3 << 0 << 3 << 0;
  QTest::addRow("pp 4, rank 3") << 1 << 1 << 4 << 3 << 0 << 0 << 3;
  // Megatron's example: dp 2 x tp 2 x pp 4.
  QTest::addRow("2x2x4, rank 1") << 2 << 2 << 4 << 1 << 0 << 1 << 0;
  QTest::addRow("2x2x4, rank 2") << 2 << 2 << 4 << 2 << 1 << 0 << 0;
  QTest::addRow("2x2x4, rank 7") << 2 << 2 << 4 << 7 << 1 << 1 << 1;
  QTest::addRow("2x2x4, rank 12") << 2 << 2 << 4 << 12 << 0 << 0 << 3;
  QTest::addRow("2x2x4, rank 15") << 2 << 2 << 4 << 15 << 1 << 1 << 3;
  // dp 3 x tp 8 x pp 2: a stage is 24 ranks, a replica 8.
  QTest::addRow("3x8x2, rank 8") << 3 << 8 << 2 << 8 << 1 << 0 << 0;
  QTest::addRow("3x8x2, rank 23") << 3 << 8 << 2 << 23 << 2 << 7 << 0;
  QTest::addRow("3x8x2, rank 24") << 3 << 8 << 2 << 24 << 0 << 0 << 1;
  QTest::addRow("3x8x2, rank 45") << 3 << 8 << 2 << 45 << 2 << 5 << 1;
}

void TestRankOrder::coordinates() {
  QFETCH(int, dp);
  QFETCH(int, tp);
  QFETCH(int, pp);
  QFETCH(int, rank);
  QFETCH(int, dp_rank);
  QFETCH(int, tp_rank);
  QFETCH(int, pp_rank);
  const RankOrder order{dp, tp, pp};
  const RankCoordinates at = order.coordinates(rank);
  QCOMPARE(at.dp, dp_rank);
  QCOMPARE(at.tp, tp_rank);
  QCOMPARE(at.pp, pp_rank);
  QCOMPARE(order.rank(at), rank);
  QCOMPARE(order.first_rank_of_stage(pp_rank), pp_rank * dp * tp);
}

void TestRankOrder::roundTrip_data() {
  QTest::addColumn<int>("dp");
  QTest::addColumn<int>("tp");
  QTest::addColumn<int>("pp");
  QTest::addRow("1x1x1") << 1 << 1 << 1;
  QTest::addRow("8x1x1") << 8 << 1 << 1;
  QTest::addRow("2x2x4") << 2 << 2 << 4;
  QTest::addRow("3x8x2") << 3 << 8 << 2;
  QTest::addRow("4x2x3") << 4 << 2 << 3;
}

// Every rank has its own coordinates, in range, and they lead back to it;
// the tensor rank changes fastest and the pipeline stage slowest.
void TestRankOrder::roundTrip() {
  QFETCH(int, dp);
  QFETCH(int, tp);
  QFETCH(int, pp);
  const RankOrder order{dp, tp, pp};
  QCOMPARE(order.world_size(), dp * tp * pp);
  std::set<std::tuple<int, int, int>> seen;
  for (int r = 0; r < order.world_size(); ++r) {
    const RankCoordinates at = order.coordinates(r);
    QVERIFY(at.dp >= 0 && at.dp < dp);
    QVERIFY(at.tp >= 0 && at.tp < tp);
    QVERIFY(at.pp >= 0 && at.pp < pp);
    QVERIFY(seen.insert({at.dp, at.tp, at.pp}).second);
    QCOMPARE(order.rank(at), r);
    if (r + 1 < order.world_size() && at.tp + 1 < tp) {
      QCOMPARE(order.coordinates(r + 1), (RankCoordinates{at.dp, at.tp + 1, at.pp}));
    }
  }
  for (int s = 0; s < pp; ++s)
    QCOMPARE(order.coordinates(order.first_rank_of_stage(s)), (RankCoordinates{0, 0, s}));
}

// Megatron-LM's documented groups for 16 GPUs, tp 2, pp 4 (so dp 2).
void TestRankOrder::megatronGroups() {
  const RankOrder order{2, 2, 4};
  const Groups tensor{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}};
  const Groups data{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}};
  const Groups pipeline{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}};
  const auto sorted = [](Groups g) {
    std::sort(g.begin(), g.end());
    return g;
  };
  QCOMPARE(sorted(groups_of(order, [&](auto c) { return order.tensor_parallel_group(c); })),
           tensor);
  QCOMPARE(sorted(groups_of(order, [&](auto c) { return order.data_parallel_group(c); })), data);
  QCOMPARE(sorted(groups_of(order, [&](auto c) { return order.pipeline_group(c); })), pipeline);
  // Group numbers run from 0 to the number of groups less one.
  for (int r = 0; r < order.world_size(); ++r) {
    const RankCoordinates c = order.coordinates(r);
    QVERIFY(order.tensor_parallel_group(c) < 8);
    QVERIFY(order.data_parallel_group(c) < 8);
    QVERIFY(order.pipeline_group(c) < 4);
  }
}

QTEST_GUILESS_MAIN(TestRankOrder)
#include "tst_rank_order.moc"
