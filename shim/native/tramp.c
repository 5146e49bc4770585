/* The trampoline pool: MS_NTRAMP return-address trampolines, each with its own unwind entry (FDE)
 * in .eh_frame, so C++ exceptions, pthread_exit, backtrace(), gdb and valgrind unwind through a
 * frame whose return address was replaced as if nothing had changed.
 *
 * Block i (16 bytes, 16-aligned): a nop (unwinders look up return address - 1), `call
 * ms_tramp_common`, two int3, then a 64-bit link-time constant: the distance from that word to
 * ms_tramp_ra[i], the return address the trampoline stands for (native/pool.c writes it).
 * FDE i describes the frame "between" the returned function and its caller: CFA = rsp + 8 (so it
 * is never mistaken for the caller's frame), the caller's rsp = CFA - 8, and the caller's rip =
 * ms_tramp_ra[i], found from rip alone with the DWARF operations every reader knows (valgrind's
 * CFI reader has no DW_OP_const8u/dup/deref_size): block = rip & -16 (rip - 1 or rip, whichever the
 * unwinder uses), word = block + 8, rip = *(word + *word).  The unwind data stays read-only.
 * The CIE names ms_tramp_personality, called for each such frame that an exception or a forced
 * unwind passes, which closes the stage.
 * A trampoline calls up through ms_tramp_handlers (native/leave.c sets them at start, before any
 * trampoline is used): the pool stays below the known frames that use it, at the cost of an
 * indirect call where a direct one was (the same instruction count).
 * Only top-level assembly here: no compiler-generated unwind info shares the section. */
#include <stddef.h>
#include "native/native.h"

struct ms_tramp_handlers ms_tramp_handlers;
_Static_assert(offsetof(struct ms_tramp_handlers, on_return) == 0 && offsetof(struct ms_tramp_handlers, on_unwind) == 8,
	       "the assembly below reads them so");

/* clang-format off */
__asm__(
"	.pushsection .text.ms_tramp,\"ax\",@progbits\n"
"	.p2align 4\n"
"	.globl ms_tramp_base\n"
"	.hidden ms_tramp_base\n"
"ms_tramp_base:\n"
"	.popsection\n"

"	.pushsection .eh_frame,\"a\",@progbits\n"
"	.p2align 3\n"
".Lms_cie:\n"
"	.long .Lms_cie_end - .Lms_cie_id\n"
".Lms_cie_id:\n"
"	.long 0\n"                     /* CIE id */
"	.byte 1\n"                     /* version */
"	.asciz \"zPR\"\n"
"	.uleb128 1\n"                  /* code alignment */
"	.sleb128 -8\n"                 /* data alignment */
"	.byte 16\n"                    /* return address column: rip */
"	.uleb128 6\n"                  /* augmentation data length */
"	.byte 0x1b\n"                  /* personality: pcrel sdata4 */
"	.long ms_tramp_personality - .\n"
"	.byte 0x1b\n"                  /* FDE addresses: pcrel sdata4 */
"	.byte 0x0c, 7, 8\n"            /* DW_CFA_def_cfa rsp, 8 */
"	.byte 0x14, 7, 1\n"            /* DW_CFA_val_offset rsp, CFA - 8 */
"	.p2align 3\n"
".Lms_cie_end:\n"

"	.pushsection .lbss.ms_tramp_ra,\"aw\",@nobits\n"
"	.p2align 3\n"
"	.globl ms_tramp_ra\n"
"	.hidden ms_tramp_ra\n"
"ms_tramp_ra:\n"
"	.zero 8 * 4096\n"
"	.popsection\n"

"	.set .Lms_i, 0\n"
"	.rept 4096\n"
"	.pushsection .text.ms_tramp,\"ax\",@progbits\n"
"3:	nop\n"
"	call ms_tramp_common\n"
"	.fill 2, 1, 0xcc\n"
"	.quad ms_tramp_ra + 8 * .Lms_i - .\n" /* resolved by the linker: no relocation at load */
"	.popsection\n"
"	.long 2f - 1f\n"               /* FDE length */
"1:	.long 1b - .Lms_cie\n"         /* CIE pointer */
"	.long 3b - .\n"                /* initial location */
"	.long 16\n"                    /* address range */
"	.uleb128 0\n"                  /* augmentation data length */
"	.byte 0x16, 16, 17\n"          /* DW_CFA_val_expression rip, 17 bytes: */
"	.byte 0x80, 0, 0x09, 0xf0, 0x1a, 0x38, 0x22\n"       /* breg16 0, const1s -16, and, lit8, plus */
"	.byte 0x80, 0, 0x09, 0xf0, 0x1a, 0x38, 0x22, 0x06\n" /* the same, deref */
"	.byte 0x22, 0x06\n"            /* plus, deref */
"	.p2align 2\n"
"2:\n"
"	.set .Lms_i, .Lms_i + 1\n"
"	.endr\n"
"	.popsection\n"

/* ms_native_regs(out): the caller's stack pointer after return, rbp and return address, for the
 * quick unwinder (native/cfi.c) to start from. */
"	.pushsection .text.ms_tramp,\"ax\",@progbits\n"
"	.p2align 4\n"
"	.globl ms_native_regs\n"
"	.hidden ms_native_regs\n"
"ms_native_regs:\n"
"	leaq 8(%rsp), %rax\n"
"	movq %rax, 0(%rdi)\n"
"	movq %rbp, 8(%rdi)\n"
"	movq (%rsp), %rax\n"
"	movq %rax, 16(%rdi)\n"
"	ret\n"
"	.popsection\n"

/* The personality the CIE names: the unwinder's call goes on to ms_tramp_handlers.on_unwind with
 * its arguments and return address untouched (the handler asks which unwinder called it). */
"	.pushsection .text.ms_tramp,\"ax\",@progbits\n"
"	.p2align 4\n"
"ms_tramp_personality:\n"
"	jmp *ms_tramp_handlers+8(%rip)\n"
"	.popsection\n"

/* Entered with the returned function's return values live: rax, rdx, xmm0, xmm1 (and x87, which
 * the C code never touches).  The pushed block address says which trampoline fired. */
"	.pushsection .text.ms_tramp,\"ax\",@progbits\n"
"	.p2align 4\n"
"ms_tramp_common:\n"
"	pushq %rax\n"
"	pushq %rdx\n"
"	subq $40, %rsp\n"              /* 16-byte aligned for the call */
"	movdqu %xmm0, 0(%rsp)\n"
"	movdqu %xmm1, 16(%rsp)\n"
"	movq 56(%rsp), %rdi\n"
"	call *ms_tramp_handlers(%rip)\n"
"	movq %rax, 56(%rsp)\n"         /* ret below continues at the original return address */
"	movdqu 0(%rsp), %xmm0\n"
"	movdqu 16(%rsp), %xmm1\n"
"	addq $40, %rsp\n"
"	popq %rdx\n"
"	popq %rax\n"
"	ret\n"
"	.popsection\n"
);
/* clang-format on */
