#include "net/frame_arena.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "net/server.h"

namespace silt::net {
namespace {

namespace fa = frame_arena;

class FrameArena : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fa::serves(1)) GTEST_SKIP() << "frames come from operator new in this build";
    fa::release_thread_chunk();
  }
  void TearDown() override { fa::release_thread_chunk(); }
};

TEST_F(FrameArena, FramesKeepTheirBytesAndDoNotOverlap) {
  std::vector<std::pair<uint8_t*, size_t>> frames;
  for (size_t i = 0; i < 300; ++i) {
    const size_t n = 1 + (i * 7919) % 40000;
    auto* p = static_cast<uint8_t*>(fa::allocate(n));
    ASSERT_EQ(reinterpret_cast<uintptr_t>(p) % 16, 0u);
    std::memset(p, static_cast<int>(i & 0xff), n);
    frames.emplace_back(p, n);
  }
  for (size_t i = 0; i < frames.size(); ++i) {
    const auto [p, n] = frames[i];
    for (size_t j = 0; j < n; j += 97) ASSERT_EQ(p[j], static_cast<uint8_t>(i & 0xff)) << i;
    ASSERT_EQ(p[n - 1], static_cast<uint8_t>(i & 0xff)) << i;
  }
  for (const auto& f : frames) fa::deallocate(f.first);
}

TEST_F(FrameArena, AnEmptiedChunkIsReusedWhole) {
  // Fill more than one chunk, so that the first is no longer carved from.
  std::vector<void*> frames;
  for (size_t used = 0; used < fa::chunk_size + fa::max_frame; used += fa::max_frame) {
    frames.push_back(fa::allocate(fa::max_frame));
  }
  const auto before = fa::stats();
  // The first chunk's frames: the first three (a chunk holds three of max_frame after its
  // header). While one lives, the chunk stays out of the free list.
  fa::deallocate(frames[0]);
  fa::deallocate(frames[1]);
  EXPECT_EQ(fa::stats().chunks_free, before.chunks_free);
  fa::deallocate(frames[2]);
  EXPECT_EQ(fa::stats().chunks_free, before.chunks_free + 1);

  for (size_t i = 3; i < frames.size(); ++i) fa::deallocate(frames[i]);
  fa::release_thread_chunk();
  const auto emptied = fa::stats();
  EXPECT_EQ(emptied.chunks_free, before.chunks_free + 2);

  void* again = fa::allocate(100);
  const auto after = fa::stats();
  EXPECT_EQ(after.chunks_reused, emptied.chunks_reused + 1);
  EXPECT_EQ(after.chunks_mapped, emptied.chunks_mapped);
  fa::deallocate(again);
}

TEST_F(FrameArena, FramesFreedOnAnotherThreadReturnTheirChunk) {
  std::vector<void*> frames;
  std::thread maker([&] {
    for (int i = 0; i < 10; ++i) frames.push_back(fa::allocate(20000));
    // The maker ends: its chunk now lives only through its frames.
  });
  maker.join();
  const auto before = fa::stats();
  std::thread freer([&] {
    for (void* p : frames) fa::deallocate(p);
  });
  freer.join();
  EXPECT_EQ(fa::stats().chunks_free, before.chunks_free + 1);
}

TEST_F(FrameArena, ChunksBeyondTheKeptOnesAreUnmapped) {
  std::vector<void*> frames;
  const size_t chunks = fa::kept_chunks + 8;
  frames.reserve(chunks * 3);
  for (size_t i = 0; i < chunks * 3; ++i) frames.push_back(fa::allocate(fa::max_frame));
  fa::release_thread_chunk();
  const auto before = fa::stats();
  for (void* p : frames) fa::deallocate(p);
  const auto after = fa::stats();
  EXPECT_GT(after.chunks_unmapped, before.chunks_unmapped);
  EXPECT_EQ(after.chunks_free, fa::kept_chunks);
}

TEST_F(FrameArena, ChunksLeftFreeBetweenTwoReleasesAreUnmapped) {
  (void)fa::release_idle();
  (void)fa::release_idle();  // nothing was taken in between: every free chunk goes
  ASSERT_EQ(fa::stats().chunks_free, 0u);

  // A burst maps chunks and frees them: kept for now (they were needed since the last call).
  std::vector<void*> frames;
  for (size_t i = 0; i < 9; ++i) frames.push_back(fa::allocate(fa::max_frame));
  for (void* p : frames) fa::deallocate(p);
  fa::release_thread_chunk();
  const size_t burst = fa::stats().chunks_free;
  ASSERT_GE(burst, 3u);
  EXPECT_EQ(fa::release_idle(), 0u);
  EXPECT_EQ(fa::stats().chunks_free, burst);

  // One is taken again before the next call: the others stayed idle and go, it stays.
  void* again = fa::allocate(100);
  fa::deallocate(again);
  fa::release_thread_chunk();
  const auto before = fa::stats();
  EXPECT_EQ(fa::release_idle(), burst - 1);
  const auto after = fa::stats();
  EXPECT_EQ(after.chunks_free, 1u);
  EXPECT_EQ(after.chunks_unmapped, before.chunks_unmapped + burst - 1);
}

TEST_F(FrameArena, LargeFramesComeFromOperatorNew) {
  EXPECT_TRUE(fa::serves(fa::max_frame));
  EXPECT_FALSE(fa::serves(fa::max_frame + 1));
  EXPECT_FALSE(fa::serves(0));
  const auto before = fa::stats();
  {
    frame_bytes big(fa::max_frame + 1);
    big.back() = 1;
  }
  const auto after = fa::stats();
  EXPECT_EQ(after.chunks_mapped, before.chunks_mapped);
  EXPECT_EQ(after.chunks_reused, before.chunks_reused);
}

TEST_F(FrameArena, FrameBytesGrowAcrossTheLimit) {
  frame_bytes f(1000);
  std::memset(f.data(), 7, f.size());
  f.resize(fa::max_frame + 5000);  // moves out of the arena
  EXPECT_EQ(f[999], 7);
  f.resize(10);
  f.shrink_to_fit();  // and back
  EXPECT_EQ(f[9], 7);
}

}  // namespace
}  // namespace silt::net
