// hello.S: a small DPU program laid out like what the SDK toolchain builds.
//
//   python -c "import sys; from aiopim.cli import main; sys.exit(main())" \
//       asm examples/isa/hello.S -o /tmp/hello.dpu
//   ... disasm /tmp/hello.dpu
//
// Every tasklet adds (its id + 1) to the __host variable `counter` under an atomic-bit mutex and
// prints "hello from tasklet <id>" into the DPU log (what printf does: the message, encoded as
// the SDK's runtime encodes it, is copied by DMA to the MRAM ring `__stdout_buffer` under the
// stdout lock, and the write pointer in `__stdout_buffer_state` moves on); the host reads it
// back with dpu_log_read (`python examples/isa_hello.py`). Tasklet 0 also copies a greeting
// from WRAM to the MRAM variable `message`.

        .set NR_TASKLETS, 4
        .set STACK_SIZE_DEFAULT, 256

// ---- bootstrap: IRAM index 0, where the host's launch starts thread 0 -------------------------
        .text
        .globl __bootstrap
        .type __bootstrap, @function
__bootstrap:
        jnz id, __sys_start_thread      // only thread 0 initialises the runtime state
        move r0, 255
__sys_release_atomics:                  // clear every atomic bit (all mutexes free)
        release r0, 0, nz, .+1
        add r0, r0, -1, pl, __sys_release_atomics
        sd zero, __stdout_buffer_state, 0   // the log is empty at boot
__sys_start_thread:
        jeq id, NR_TASKLETS - 1, __sys_stack_setup
        boot id, 1                      // boot chain: thread t starts thread t + 1
__sys_stack_setup:
        ld d22, id8, __sys_thread_stack_table_ptr   // r22 = this thread's stack
        call r23, main
__sys_end:
        stop true, __sys_end            // park the thread when main returns
        .size __bootstrap, . - __bootstrap

// ---- main ------------------------------------------------------------------------------------
        .globl main
        .type main, @function
main:
        add r22, r22, 8                 // a frame, as compiled code makes one
        sw r22, -8, r23
__main_lock:
        acquire zero, counter_lock, nz, __main_lock
        lw r0, zero, counter
        add r1, id, 1
        add r0, r0, r1
        sw zero, counter, r0
        release zero, counter_lock, nz, .+1
        call r23, print_hello
        jnz id, __main_done
        move r0, greeting               // WRAM address
        move r1, message                // MRAM offset
        sdma r0, r1, (16 / 8) - 1       // 16 bytes WRAM -> MRAM
__main_done:
        lw r23, r22, -8
        add r22, r22, -8
        move r0, 0                      // return 0
        jump r23
        .size main, . - main

// ---- print_hello: printf("hello from tasklet %d\n", id) into the log; link in r23 ---------
        .globl print_hello
        .type print_hello, @function
print_hello:
        move r0, id
        lsl r0, r0, 3                   // this tasklet's 40-byte message buffer
        move r1, id
        lsl r1, r1, 5
        add r0, r0, r1
        add r0, r0, __print_buffer
        move r1, 0
__print_copy:                           // copy the encoded message template
        ld d2, r1, __print_template
        add r4, r0, r1
        sd r4, 0, d2
        add r1, r1, 8
        jltu r1, 40, __print_copy
        move r1, id
        sb r0, 27, r1                   // the %d argument (little-endian int, id < 256)
__print_lock:
        acquire zero, __stdout_lock, nz, __print_lock
        lw r1, zero, __stdout_buffer_state  // write pointer
        add r2, r1, __stdout_buffer
        sdma r0, r2, (40 / 8) - 1       // 40 bytes WRAM -> MRAM
        add r1, r1, 40
        sw zero, __stdout_buffer_state, r1
        release zero, __stdout_lock, nz, .+1
        jump r23
        .size print_hello, . - print_hello

// ---- data -------------------------------------------------------------------------------------
        .data
        .balign 8
greeting:
        .asciz "hello, world!\n"
        .balign 8
__print_template:                       // printf's encoding: "%s%d%s", the text runs, the int
        .ascii "%s%d%s\0hello from tasklet \0"
        .byte 0, 0, 0, 0                // the %d argument, patched in
        .ascii "\n\0"
        .zero 7                         // the cache padding to a multiple of 8 bytes
        .balign 8
__print_buffer:
        .zero NR_TASKLETS * 40
        .globl __stdout_buffer_state
__stdout_buffer_state:                  // write pointer, wrapped flag
        .word 0, 0
        .size __stdout_buffer_state, 8

        .section .data.__sys_host       // __host variables: visible to dpu_copy_to/from
        .globl counter
        .type counter, @object
counter:
        .word 0
        .size counter, 4

        .atomic                         // one byte per atomic bit
counter_lock:
        .byte 0
__stdout_lock:
        .byte 0

        .mram
        .globl message
message:
        .zero 16
        .size message, 16

        .section .mram.noinit           // where printf would flush (weak, as in the SDK)
        .weak __stdout_buffer
__stdout_buffer:
        .space 1048576
        .size __stdout_buffer, 1048576
