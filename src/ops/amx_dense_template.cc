#include "ops/amx_dense_template.h"

#include "ops/dense_int8_amx.h"

namespace kiln::ops::detail {

schedule::ConfigSpace AmxDenseTemplate::space(const Workload& w) const {
  schedule::ConfigSpace space;
  space.define_knob("panels_per_task", amx_panel_choices(dims(w).M));
  return space;
}

schedule::Config AmxDenseTemplate::fallback(const Workload& w, const Isa&) const {
  return KnobValues().knob("panels_per_task", amx_fallback_panels(dims(w).M)).in(space(w));
}

void AmxDenseTemplate::schedule(schedule::Schedule& sch, const TemplateInstance& inst,
                                const ir::Tensor& output, const schedule::Config&) const {
  TileStages st = prepare_anchor(sch, inst.anchor, output, name());
  st.tile->compute_at(st.out, st.out->axis(0));
  st.out->parallel(st.out->axis(0));
  for (const ir::Tensor& t : ir::input_tensors(inst.anchor))
    if (!t->is_placeholder) sch[t]->parallel(sch[t]->axis(0));
}

double AmxDenseTemplate::flops(const Workload& w) const {
  AmxDenseShape d = dims(w);
  return 2.0 * d.M * d.N * d.K;
}

std::vector<int64_t> AmxDenseTemplate::output_shape(const Workload& w,
                                                    const schedule::Config&) const {
  AmxDenseShape d = dims(w);
  return {d.M, d.N};
}

}  // namespace kiln::ops::detail
