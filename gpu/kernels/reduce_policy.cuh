/* reduce_policy.cuh: the production (fast) path's tuning, apart from its kernels as CUB keeps its
 * policies apart from its dispatch: block sizes, loads in flight, and the sizes where the kernel
 * shape changes. Each number is the one measured fastest (docs/PERFORMANCE.md). Included by
 * reduce.cu alone. */

namespace {

/* Rows of at most this many bytes, more than one of them, are short rows: lane groups or tiles
 * (fast_group, fast_tile). An arg op's to 32 KiB, a warp a row: a block a row there (k_fast_rows,
 * two passes of 256 threads, then a tree of arg states) ran float64 argmax at rows of 4096 at
 * 87% of the ceiling on an H200, a warp a row at 102%; float32 argmax at 8192 95 -> 99%, int32
 * 97.6 -> 99.6% (on an H100 these lost 0.4-1.0, to 99-101%). Sums, min and max gained nothing
 * there (float64 sum at 4096 103.6 -> 102.8%). */
static i64 short_row_max_bytes(const gr_kjob *j)
{
    return gr_op_is_arg(j->op) ? 32 << 10 : 16 << 10;
}

/* Tuning lives here, apart from the kernel bodies (CUB's dispatch policies): threads per block,
 * 16-byte vectors in flight per thread, and the row lengths where the kernel shape changes. */
template <class In> struct fast_policy {
    static constexpr int block = 256;
    /* Short rows of whole vectors in tiles (k_fast_tile), measured on an H200 and an H100. Sums, min and max to tile_ahead_max vectors a row: 4
     * loads a lane, the next tile's issued ahead (+3 to +10 points of the ceiling on the H200,
     * +1 to +8 on the H100). Arg ops only at tile_arg_ahead vectors, with 2 lanes a row (one row
     * a lane a tile, one shuffle level: float64 argmax at rows of 16 on the H200, 71 -> 81%);
     * elsewhere ahead lost them 3-11 points on the H200. The rest to tile_max: 8 loads a lane,
     * not ahead (4 loads would take 16-32 lanes a row at 64-128 vectors, a shuffle level more).
     * Longer rows a warp each (k_fast_group: +1 to +5 points at 256 vectors). */
    static constexpr int tile_ahead_unroll = 4, tile_unroll = 8;
    static constexpr int tile_ahead_max = 32, tile_arg_ahead = 8, tile_max = 128;
    static constexpr int unroll = 4;                                 /* 64 bytes in flight per thread */
    static constexpr int vec = 16 / sizeof(In);                      /* elements per 16-byte load */
    /* A split row's pieces are whole multiples of 512 bytes, a warp's 32 loads, so that every
     * piece starts where a warp's span does (relative to the row): float64 sum at 8 GiB in
     * 16368 pieces of 524,816 bytes ran at 0.976 of CUB, in 16896 of 508,416 at 1.011
     * (H100) */
    static constexpr int align = 512 / sizeof(In);
    static constexpr i64 min_chunk = (i64)block * unroll * vec;      /* elements a block takes at least */
    static constexpr i64 group4_max = 4 * unroll * vec;              /* rows up to this: 4 lanes each */
    /* Long rows are cut into pieces of about this many elements (512 KiB), in whole rounds of the
     * resident blocks: on an H200, 2 MiB pieces leave a tail behind the slowest blocks (-4% at
     * 4 GiB) and 256 KiB pieces pay each block's start-up and finish too often (-2%). */
    static constexpr i64 piece = (512 << 10) / sizeof(In);
    /* An arg op's pieces are twice as long: each piece ends in a tree of 16-byte states and a
     * ticket. At 1 MiB argmax of every dtype at 2^26-2^30 rose 0.6-1.6% on an H200 (float64
     * 0.983-0.994 -> 0.996-1.004 of CUB; sums and max lost up to 1.7% at 2^27 there) and held on
     * an H100, whose arg rows of 2^18-2^20 lost 0.5-1.2 points, to 98.9-102.3% of the ceiling. */
    static constexpr i64 arg_piece = 2 * piece;
    static constexpr int max_rounds = 64;      /* bounds the partials the finishing block reads */
    static constexpr int waves = 4;            /* many whole rows: block items per resident block */
    static constexpr int cols_unroll = 8;      /* axis 0: scalar loads in flight per thread */
    static constexpr int cols_vec_unroll = 4;  /* axis 0, columns in whole vectors: 16-byte loads */
    /* Whole arrays of at most 64 KiB are one block's: 256 threads to 16 KiB, 512 to 32 KiB, 1024
     * to 64 KiB, 4 vectors a thread at most (k_fast_block; one block beat an 8-block cluster by
     * 13-22% at 32 and 64 KiB on an H100). */
    static constexpr i64 block_small = (16 << 10) / sizeof(In), block_mid = (32 << 10) / sizeof(In);
    static constexpr i64 block_max = (64 << 10) / sizeof(In);
    /* Above, to 64 MiB, a block per tile of 4 vectors a thread (k_fast_tiles): 128 threads to
     * 1 MiB, 512 above. On an H100 tiles beat k_fast_rows at every size from 2^17 elements to 64 MiB and lost to it
     * for float64 argmax at 128 MiB, whose 4096 partials the finishing block reads one by one;
     * 128-thread tiles beat the 8-block cluster that had taken 64-256 KiB by 5-8% for sums and
     * max (argmax -3% to +5%), and 512-thread tiles by 5-10% at 512 KiB-1 MiB; 512 threads were
     * the faster from 2 MiB, by up to 9% at 32-64 MiB. Not further: from 2^25 to 2^30 elements,
     * sums and max in tiles ran at 1.01-1.05 of CUB on an H100 (k_fast_rows 0.99-1.02) but on an
     * H200 fell below 1.00 from 2^26, to 0.85, and arg ops at 0.95-0.99 on both. */
    static constexpr i64 tiles_small_max = (1 << 20) / sizeof(In);
    static constexpr i64 tiles_max = (64 << 20) / sizeof(In);
};

} // namespace
