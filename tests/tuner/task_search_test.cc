// The search reaches the target's ISA: a task's search proposes only configs
// whose register tile fits the ISA's vector registers (OpTemplate::fits), for
// every tuner, and the fallback it measures first is the ISA's own.
#include "tuner/task_search.h"

#include <gtest/gtest.h>

#include "codegen/target.h"

namespace kiln::tuner {
namespace {

Isa isa_of(const char* target) { return codegen::Target::parse(target).isa(); }

Task task_of(const std::string& key) {
  Task t;
  t.workload_key = key;
  t.template_name = ops::Workload::parse(key).template_name;
  t.count = 1;
  return t;
}

// Proposals of `rounds` batches of 16, each told a made-up speed so that
// the model-based tuner trains and plans.
std::vector<schedule::Config> propose(TaskSearch& s, SharedCostModel& model, int rounds) {
  std::vector<schedule::Config> all;
  for (int r = 0; r < rounds; ++r) {
    size_t not_from_tuner = 0;
    std::vector<schedule::Config> batch = s.next_batch(16, &not_from_tuner);
    if (batch.empty()) break;
    std::vector<double> gflops;
    for (const auto& c : batch) gflops.push_back(1.0 + static_cast<double>(c.index() % 97));
    s.record(batch, gflops, not_from_tuner);
    model.retrain();
    all.insert(all.end(), batch.begin(), batch.end());
  }
  return all;
}

TEST(TaskSearch, ProposesOnlyConfigsThatFitTheIsasRegisters) {
  const Isa avx512 = isa_of("llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512");
  const Isa avx2 = isa_of("llvm -mtriple=x86_64-linux-gnu -mcpu=haswell");
  const Isa v7 = isa_of("llvm -mtriple=armv7a-linux-gnueabihf -mcpu=cortex-a7 -mattr=+neon");
  const std::vector<std::string> keys = {
      "dense_pack.x86(data=[128,256],weight=[256,1024],dtype=float32)",
      "conv2d_NCHWc.x86(data=[1,64,28,28],kernel=[64,64,3,3],strides=[1,1],pads=[1,1,1,1],"
      "dilation=[1,1],dtype=float32)"};
  for (const std::string& key : keys)
    for (const char* tuner : {"random", "xgb"})
      for (const Isa& isa : {avx2, v7}) {
        SCOPED_TRACE(key + " " + tuner + " " + isa.isa_class);
        auto s = TaskSearch::resume(task_of(key), {}, /*free_layout=*/true, isa);
        SharedCostModel model;
        model.add_task(s.get());
        s->tuner = make_task_tuner(tuner, *s, model, 16, 3);
        std::vector<schedule::Config> got = propose(*s, model, 4);
        ASSERT_GE(got.size(), 32u);
        EXPECT_EQ(got.front(), s->tmpl->fallback(s->workload, isa));  // measured first
        int wider_only = 0;  // proposals a 32-register ISA would also take
        for (const auto& c : got) {
          EXPECT_TRUE(s->tmpl->fits(s->workload, c, isa)) << c.to_json();
          wider_only += s->tmpl->fits(s->workload, c, avx512);
        }
        EXPECT_EQ(wider_only, static_cast<int>(got.size()));
      }
}

// Without the ISA filter a random search of the same space proposes configs
// that spill on AVX2: the filter is what keeps them out.
TEST(TaskSearch, TheSpaceItselfHoldsConfigsThatDoNotFitAvx2) {
  const Isa avx2 = isa_of("llvm -mtriple=x86_64-linux-gnu -mcpu=haswell");
  const std::string key = "dense_pack.x86(data=[128,256],weight=[256,1024],dtype=float32)";
  ops::Workload w = ops::Workload::parse(key);
  const ops::OpTemplate& t = ops::get_template(w.template_name);
  RandomTuner random(t.space(w), {}, 3);
  int spill = 0;
  for (const auto& c : random.next_batch(64)) spill += !t.fits(w, c, avx2);
  EXPECT_GT(spill, 0);
}

}  // namespace
}  // namespace kiln::tuner
