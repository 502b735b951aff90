/* Picks the tuned config of the convolution size nearest to the one given on the command
 * line, as a program does before it compiles or launches its kernel, and prints it. The
 * header comes from `ktune best --format header` at build time (see CMakeLists.txt). */
#include <stdio.h>
#include <stdlib.h>

#include "ktune_convolution_kernel.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s WIDTH HEIGHT\n", argv[0]);
        return 2;
    }
    const long long shape[2] = {strtoll(argv[1], NULL, 10), strtoll(argv[2], NULL, 10)};
    const ktune_convolution_kernel_config *c = ktune_convolution_kernel_select(shape);
    if (c == NULL) {
        fprintf(stderr, "sizes must be positive\n");
        return 2;
    }
    printf("block_size_x=%d block_size_y=%d tile_size_x=%d tile_size_y=%d "
           "read_only=%d use_padding=%d use_shmem=%d use_cmem=%d filter_height=%d filter_width=%d\n",
           c->block_size_x, c->block_size_y, c->tile_size_x, c->tile_size_y, c->read_only,
           c->use_padding, c->use_shmem, c->use_cmem, c->filter_height, c->filter_width);
    return 0;
}
