/* A blocked matrix transpose through shared memory, in the Kernel Tuner style: the tuned
 * parameters arrive as #defines, the sizes as arguments.
 *
 *   out[x][y] = in[y][x]   (in: ny rows of nx; out: nx rows of ny)
 *
 * Each block moves one tile of block_size_x x block_size_x values: block_size_x threads wide,
 * block_size_y rows of threads stepping through the tile's rows; `pad` extra columns in the
 * shared tile avoid bank conflicts. The grid is (nx / block_size_x, ny / block_size_x).
 */
extern "C" __global__ void transpose(float *out, const float *in, int nx, int ny)
{
    __shared__ float tile[block_size_x][block_size_x + pad];
    int x = blockIdx.x * block_size_x + threadIdx.x;
    int y0 = blockIdx.y * block_size_x;
    for (int j = threadIdx.y; j < block_size_x; j += block_size_y) {
        int y = y0 + j;
        if (x < nx && y < ny) tile[j][threadIdx.x] = in[(long)y * nx + x];
    }
    __syncthreads();
    int ox = blockIdx.y * block_size_x + threadIdx.x;
    int oy0 = blockIdx.x * block_size_x;
    for (int j = threadIdx.y; j < block_size_x; j += block_size_y) {
        int oy = oy0 + j;
        if (ox < ny && oy < nx) out[(long)oy * ny + ox] = tile[threadIdx.x][j];
    }
}
