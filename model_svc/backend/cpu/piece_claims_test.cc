#include "model_svc/backend/cpu/piece_claims.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace llm::cpu {
namespace {

// One thread alone: its own run front to back, then the others' runs back to
// front, starting with the next thread's.
TEST(PieceClaimsTest, OwnRunFirstThenStealsFromTheBack) {
  PieceClaims claims(3);
  claims.Reset(9, 3);  // runs [0, 3), [3, 6), [6, 9)
  std::vector<int64_t> order;
  for (int64_t p = claims.Next(1); p >= 0; p = claims.Next(1)) order.push_back(p);
  EXPECT_EQ(order, (std::vector<int64_t>{3, 4, 5, 8, 7, 6, 2, 1, 0}));
  EXPECT_EQ(claims.Next(0), -1);
  EXPECT_EQ(claims.Next(2), -1);
}

TEST(PieceClaimsTest, FewerPiecesThanThreads) {
  PieceClaims claims(4);
  claims.Reset(2, 4);            // runs [0, 0), [0, 1), [1, 1), [1, 2)
  EXPECT_EQ(claims.Next(0), 0);  // its own run is empty: thread 1's, then 3's
  EXPECT_EQ(claims.Next(0), 1);
  EXPECT_EQ(claims.Next(3), -1);
  claims.Reset(0, 4);
  for (int t = 0; t < 4; ++t) EXPECT_EQ(claims.Next(t), -1);
}

// Threads taking pieces at once (Reset again between rounds, as every
// product does): each piece exactly once.
TEST(PieceClaimsTest, EveryPieceExactlyOnceUnderContention) {
  for (const int threads : {1, 2, 3, 8}) {
    PieceClaims claims(threads);
    for (const int64_t pieces : {1, 7, 64, 1000}) {
      for (int round = 0; round < 20; ++round) {
        claims.Reset(pieces, threads);
        std::vector<std::atomic<int>> taken(pieces);
        std::atomic<int> ready{0};
        std::vector<std::thread> workers;
        for (int t = 0; t < threads; ++t) {
          workers.emplace_back([&, t] {
            ready.fetch_add(1);
            while (ready.load() < threads) std::this_thread::yield();  // start together
            // Thread 0 yields after each piece in every other round: the others steal.
            for (int64_t p = claims.Next(t); p >= 0; p = claims.Next(t)) {
              taken[p].fetch_add(1);
              if (t == 0 && round % 2 == 0) std::this_thread::yield();
            }
          });
        }
        for (std::thread& w : workers) w.join();
        for (int64_t p = 0; p < pieces; ++p) {
          ASSERT_EQ(taken[p].load(), 1) << threads << " threads, piece " << p << " of " << pieces;
        }
      }
    }
  }
}

}  // namespace
}  // namespace llm::cpu
