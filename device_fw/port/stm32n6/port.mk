# ---- the stm32n6 port: the firmware on the STM32N6570-DK (Cortex-M55), development boot -------
#   make stm32n6      build/stm32n6/hilbench-stm32n6.elf (arm-none-eabi-gcc, no libc calls but
#                     memcpy/memset, no heap), linked at 0x34000400 (AXISRAM1, Secure alias) with
#                     a GNU build id that HELLO reports; `hilbench load` puts it on a board.
#   STM32N6_BAUD=115200    USART1's baud rate (default 921600)
#   STM32N6_PCLK2_HZ=N     USART1's kernel clock, if not the reset clock tree's (HSI 64 MHz)
# docs/board.md. Included by device_fw/Makefile; variables prefixed N6_ to stay out of its way.
N6_CC       ?= arm-none-eabi-gcc
N6_DIR      := $(BUILD)/stm32n6
N6_ARCH     := -mcpu=cortex-m55 -mthumb -mfloat-abi=hard
N6_OPT      ?= -O2 -g
STM32N6_BAUD ?= 921600
STM32N6_PCLK2_HZ ?= 0
N6_FLAGS     = $(CSTD) $(WARN) $(N6_OPT) $(N6_ARCH) $(INC) -Iport/stm32n6 -Iport/cortex_m \
               -ffunction-sections -fdata-sections -DSTM32N6_BAUD=$(STM32N6_BAUD)u \
               -DSTM32N6_PCLK2_HZ=$(STM32N6_PCLK2_HZ)u $(EXTRA_CFLAGS)
N6_LD       := -nostartfiles -Wl,--gc-sections -Wl,--no-warn-rwx-segments -Wl,--build-id=sha1 \
               -Wl,--nmagic \
               -Lport/stm32n6 -Tstm32n6.ld
# with what the Cortex-M55 ports share (port/cortex_m: CM_SRC, CM_HDRS of device_fw/Makefile)
N6_PORT     := $(sort $(wildcard port/stm32n6/*.c)) $(CM_SRC)
N6_HDRS     := $(HEADERS) $(CM_HDRS) $(wildcard port/stm32n6/*.h) port/stm32n6/stm32n6.ld \
               port/stm32n6/port.mk
N6_OBJ      := $(patsubst %.c,$(N6_DIR)/obj/%.o,$(CORE_SRC) $(N6_PORT))

.PHONY: stm32n6
stm32n6: $(N6_DIR)/hilbench-stm32n6.elf

$(N6_DIR)/flags: FORCE
	@mkdir -p $(@D)
	@echo '$(N6_FLAGS)' | cmp -s - $@ || echo '$(N6_FLAGS)' > $@

$(N6_DIR)/obj/%.o: %.c $(N6_HDRS) $(N6_DIR)/flags
	@mkdir -p $(@D)
	$(N6_CC) $(N6_FLAGS) -c -o $@ $<

$(N6_DIR)/hilbench-stm32n6.elf: $(N6_OBJ) port/stm32n6/stm32n6.ld
	$(N6_CC) $(N6_ARCH) $(N6_LD) --specs=nano.specs -Wl,-Map=$(N6_DIR)/hilbench-stm32n6.map \
	  -o $@ $(N6_OBJ)
