/* A 5-point 2-D stencil (Jacobi step) over an interior of problem_size_x x problem_size_y
 * points, tiled for the cache, written in the Kernel Tuner style: the problem size and the
 * tuned parameters arrive as #defines, the arguments are plain pointers.
 *
 *   out[y][x] = 0.25 * (in[y-1][x] + in[y+1][x] + in[y][x-1] + in[y][x+1])
 *
 * `in` holds (problem_size_y + 2) x (problem_size_x + 2) values (a one-point halo), `out`
 * problem_size_y x problem_size_x. Tuned: tile_x, tile_y (cache tiles), unroll_x and
 * threads (OpenMP threads over rows of tiles).
 */
#include <omp.h>

#define NX problem_size_x
#define NY problem_size_y
#define W (NX + 2)
#define KT_PRAGMA(x) _Pragma(#x)
#define KT_UNROLL(n) KT_PRAGMA(GCC unroll n)

void stencil(float *restrict out, const float *restrict in)
{
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int ty = 0; ty < NY; ty += tile_y) {
        for (int tx = 0; tx < NX; tx += tile_x) {
            int ye = ty + tile_y < NY ? ty + tile_y : NY;
            int xe = tx + tile_x < NX ? tx + tile_x : NX;
            for (int y = ty; y < ye; y++) {
                const float *row = in + (y + 1) * W + 1;
                KT_UNROLL(unroll_x)
                for (int x = tx; x < xe; x++) {
                    out[y * NX + x] = 0.25f * (row[x - W] + row[x + W] + row[x - 1] + row[x + 1]);
                }
            }
        }
    }
}
