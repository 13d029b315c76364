/* A library of a wheel that calls C++ functions of its own library (torchcodec's pattern:
   libtorchcodec_custom_ops calls libtorchcodec_core): their parameters are torch::stable types,
   but the functions are the wheel's, not libtorch's. The mangled names are spelled out so a C
   compiler builds it:
     facebook::torchcodec::TensorReadIO::TensorReadIO(torch::stable::Tensor)
     torch::stable::detail::from(...) (header-only: never exported by libtorch) */
void _ZN8facebook10torchcodec12TensorReadIOC1EN5torch6stable6TensorE(void* self, void* tensor);
void _ZN5torch6stable6detail4fromEv(void);
int use(void* a, void* b) {
  _ZN8facebook10torchcodec12TensorReadIOC1EN5torch6stable6TensorE(a, b);
  _ZN5torch6stable6detail4fromEv();
  return 0;
}
