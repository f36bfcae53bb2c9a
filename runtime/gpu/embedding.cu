// Token embedding on the device: a row gather forward and a scatter-add
// backward (the CPU op's runtime/ops/embedding.c, same arguments).

// out[N,C] = table[ids[n], :]; one thread per element, so a warp reads 32
// consecutive floats of a table row.
extern "C" __global__ void tlm_embedding_gather(float *out, const int *ids, const float *table, int N, int C) {
  long long total = (long long)N * C, step = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
    long long n = i / C, c = i - n * C;
    out[i] = table[(long long)ids[n] * C + c];
  }
}

// dtable[ids[n], :] += dout[n, :] without atomics. Work item (k, c) owns
// column c of the table rows whose id is k modulo `classes` and walks the
// batch rows in order, so every table element receives its rows' adds in row
// order, as on the CPU: the same bits for any grid and any `classes` (which
// only spreads the work over more threads). Each item still reads all N ids;
// a faster version would sort the rows by id once (a radix sort of N ints)
// and give each distinct id's run of rows to one block, making the work
// N*C instead of classes*C*N id reads.
extern "C" __global__ void tlm_embedding_scatter_add(float *dtable, const float *dout, const int *ids, int N, int C,
                                                     int classes) {
  long long items = (long long)classes * C, step = (long long)gridDim.x * blockDim.x;
  for (long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x; j < items; j += step) {
    int k = (int)(j / C), c = (int)(j - (long long)k * C);
    for (int n = 0; n < N; n++) {
      int id = ids[n];
      if (id % classes != k) continue;
      dtable[(long long)id * C + c] += dout[(long long)n * C + c];
    }
  }
}
