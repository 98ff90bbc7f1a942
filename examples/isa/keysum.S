// keysum.S: the DPU side of the key-sum example of UPMEM's "WRAM Parallel Access" guide, in
// DPU assembly (what `process_inputs_all_tasklets` compiles to, written by hand).
//
//   aiopim asm examples/isa/keysum.S -o keysum.dpu
//   python examples/wram_fifo_keysum.py --ranks 1 --kernel isa
//
// MRAM holds NR_ELEMS (key, value) pairs as two uint32 arrays. The host pushes keys into the
// input FIFO while the DPU runs; for each key the 16 tasklets meet at a barrier, each sums the
// values of that key over its share of the elements (one 256-element block, read by DMA into
// its own WRAM cache), they meet again, tasklet 0 adds the 16 partial sums, pushes (key, sum)
// to the output FIFO and pops the input, and they meet a third time. When the input is empty
// and the host has cleared `active`, every tasklet returns.
//
// The loop reads `active` before the input pointers: a tasklet that sees `active == 0` has
// seen every push the host made before clearing it, so no tasklet can leave while the others
// wait at the barrier (the SDK's C helper reads them the other way round and has that race).

        .set NR_TASKLETS, 16
        .set STACK_SIZE_DEFAULT, 256
        .set NR_ELEMS, 4096
        .set CACHE_SIZE, 256                    // elements per DMA block (1 KiB)
        .set IN_PTR_SIZE, 5                     // input FIFO: 32 elements of 8 bytes
        .set IN_DATA_SIZE, 8
        .set OUT_PTR_SIZE, 6                    // output FIFO: 64 elements of 16 bytes
        .set OUT_DATA_SIZE, 16

// ---- bootstrap: IRAM index 0, where the host's launch starts thread 0 ------------------------
        .text
        .globl __bootstrap
        .type __bootstrap, @function
__bootstrap:
        jnz id, __sys_start_thread      // only thread 0 initialises the runtime state
        move r0, 255
__sys_release_atomics:                  // clear every atomic bit (all locks free)
        release r0, 0, nz, .+1
        add r0, r0, -1, pl, __sys_release_atomics
        sw zero, barrier_count, 0
__sys_start_thread:
        jeq id, NR_TASKLETS - 1, __sys_stack_setup
        boot id, 1                      // boot chain: thread t starts thread t + 1
__sys_stack_setup:
        ld d22, id8, __sys_thread_stack_table_ptr
        call r23, main
__sys_end:
        stop true, __sys_end            // park the thread
        .size __bootstrap, . - __bootstrap

// ---- barrier_wait: the NR_TASKLETS tasklets meet; link in r23; clobbers r8-r11 ---------------
// The last tasklet to arrive wakes the others (their ids are queued in WRAM) with `resume`,
// retrying until each has really stopped; the others `stop` until they are resumed.
        .globl barrier_wait
        .type barrier_wait, @function
barrier_wait:
        acquire zero, barrier_lock, nz, barrier_wait
        lw r8, zero, barrier_count
        add r8, r8, 1
        jeq r8, NR_TASKLETS, __barrier_last
        sw zero, barrier_count, r8
        move r9, id
        sb r8, barrier_queue - 1, r9    // queue[count - 1] = my id
        release zero, barrier_lock, nz, .+1
        stop true, __barrier_resumed    // sleep until the last tasklet resumes this one
__barrier_resumed:
        jump r23
__barrier_last:
        sw zero, barrier_count, 0
        move r9, 0
__barrier_wake:
        jeq r9, NR_TASKLETS - 1, __barrier_done
        lbu r10, r9, barrier_queue
__barrier_resume:
        resume r10, 0, nz, __barrier_resume   // until the waiter has executed its stop
        add r9, r9, 1
        jump __barrier_wake
__barrier_done:
        release zero, barrier_lock, nz, .+1
        jump r23
        .size barrier_wait, . - barrier_wait

// ---- main ------------------------------------------------------------------------------------
// r2:r3 input read_ptr (high, low), r4:r5 input write_ptr, r12 key, r16:r17 64-bit sum
        .globl main
        .type main, @function
main:
__main_loop:
        lw r0, zero, active             // active (64-bit): read first, see above
        lw r1, zero, active + 4
        or r0, r0, r1
        ld d2, zero, input_fifo         // read_ptr
        ld d4, zero, input_fifo + 8     // write_ptr
        jneq r3, r5, __main_have_input
        jneq r2, r4, __main_have_input
        jz r0, __sys_end                // input empty and inactive: done
        jump __main_loop
__main_have_input:
        ld d6, zero, output_fifo        // output read_ptr (the host's)
        ld d8, zero, output_fifo + 8    // output write_ptr
        sub r10, r9, r7                 // elements in the output FIFO (at most 64)
        jgeu r10, 1 << OUT_PTR_SIZE, __main_loop   // output full: wait for the host to drain
        call r23, barrier_wait
        // ---- process: sum the values of the head key over this tasklet's block ----
        and r11, r3, (1 << IN_PTR_SIZE) - 1
        lsl r11, r11, 3                 // slot * IN_DATA_SIZE
        lw r12, r11, __input_fifo_data  // the key (first 4 bytes of the element)
        move r13, id
        lsl r13, r13, 10                // this tasklet's block: id * CACHE_SIZE * 4 bytes
        add r14, r13, cache_keys
        add r15, r13, cache_values
        add r18, r13, keys
        ldma r14, r18, (CACHE_SIZE * 4 / 8) - 1
        add r18, r13, values
        ldma r15, r18, (CACHE_SIZE * 4 / 8) - 1
        move r16, 0
        move r17, 0
        move r13, 0
__scan_loop:
        lw r18, r14, 0
        jneq r18, r12, __scan_next
        lw r19, r15, 0
        add r17, r17, r19               // 64-bit sum: low word, then the carry
        addc r16, r16, 0
__scan_next:
        add r14, r14, 4
        add r15, r15, 4
        add r13, r13, 1
        jltu r13, CACHE_SIZE, __scan_loop
        sd id8, sum_tasklets, d16       // sum_tasklets[id]
        call r23, barrier_wait
        jnz id, __main_next
        // ---- reduce (tasklet 0): push (key, sum of the partial sums), pop the input ----
        move r16, 0
        move r17, 0
        move r13, 0
        move r14, sum_tasklets
__reduce_loop:
        ld d18, r14, 0
        add r17, r17, r19
        addc r16, r16, r18
        add r14, r14, 8
        add r13, r13, 1
        jltu r13, NR_TASKLETS, __reduce_loop
        ld d6, zero, output_fifo + 8    // output write_ptr
        and r18, r7, (1 << OUT_PTR_SIZE) - 1
        lsl r18, r18, 4                 // slot * OUT_DATA_SIZE
        add r18, r18, __output_fifo_data
        sw r18, 0, r12                  // key as a uint64
        sw r18, 4, 0
        sd r18, 8, d16                  // the sum
        add r7, r7, 1                   // then write_ptr + 1 (the element is in place)
        addc r6, r6, 0
        sd zero, output_fifo + 8, d6
        ld d2, zero, input_fifo         // pop: read_ptr + 1
        add r3, r3, 1
        addc r2, r2, 0
        sd zero, input_fifo, d2
__main_next:
        call r23, barrier_wait
        jump __main_loop
        .size main, . - main

// ---- WRAM ------------------------------------------------------------------------------------
        .data
        .balign 8
barrier_count:
        .word 0
barrier_queue:
        .zero NR_TASKLETS
        .balign 8
__input_fifo_tmp_data:                  // per-tasklet scratch of the FIFO helpers (kept for the
        .zero NR_TASKLETS * IN_DATA_SIZE        // SDK's layout; this kernel does not use it)
__output_fifo_tmp_data:
        .zero NR_TASKLETS * OUT_DATA_SIZE
sum_tasklets:
        .zero NR_TASKLETS * 8
cache_keys:
        .zero NR_TASKLETS * CACHE_SIZE * 4
cache_values:
        .zero NR_TASKLETS * CACHE_SIZE * 4

        .section .data.__sys_host       // __host variables, visible to the host
        .balign 8
        .globl active
active:
        .quad 1
        .size active, 8
        .globl input_fifo
input_fifo:                             // {read_ptr, write_ptr, data, tmp_data, ptr_size, data_size}
        .quad 0
        .quad 0
        .word __input_fifo_data
        .word __input_fifo_tmp_data
        .word IN_PTR_SIZE
        .word IN_DATA_SIZE
        .size input_fifo, 32
        .globl output_fifo
output_fifo:                            // the same, then nb_reserved
        .quad 0
        .quad 0
        .word __output_fifo_data
        .word __output_fifo_tmp_data
        .word OUT_PTR_SIZE
        .word OUT_DATA_SIZE
        .word 0
        .word 0                         // padding to 8 bytes
        .size output_fifo, 40
        .globl __input_fifo_data
__input_fifo_data:
        .zero (1 << IN_PTR_SIZE) * IN_DATA_SIZE
        .size __input_fifo_data, (1 << IN_PTR_SIZE) * IN_DATA_SIZE
        .globl __output_fifo_data
__output_fifo_data:
        .zero (1 << OUT_PTR_SIZE) * OUT_DATA_SIZE
        .size __output_fifo_data, (1 << OUT_PTR_SIZE) * OUT_DATA_SIZE

        .atomic                         // one byte per atomic bit
barrier_lock:
        .byte 0

// ---- MRAM: the (key, value) pairs, written by the host ---------------------------------------
        .section .mram.noinit
        .balign 8
        .globl keys
keys:
        .space NR_ELEMS * 4
        .size keys, NR_ELEMS * 4
        .globl values
values:
        .space NR_ELEMS * 4
        .size values, NR_ELEMS * 4
