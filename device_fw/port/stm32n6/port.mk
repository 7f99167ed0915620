# ---- the stm32n6 port: the firmware on the STM32N6570-DK (Cortex-M55), development boot -------
#   make stm32n6      build/stm32n6/hilbench-stm32n6.elf (arm-none-eabi-gcc, no libc calls but
#                     memcpy/memset, no heap), linked at 0x34000400 (AXISRAM1, Secure alias) with
#                     a GNU build id that HELLO reports; `hilbench load` puts it on a board.
#   make stm32n6-flash   the same objects linked for flash boot (the boot ROM starts it from
#                     the external flash): build/stm32n6/hilbench-stm32n6-flash.elf at 0x34180400
#                     (AXISRAM2) and its .bin, which ST's signing tool makes a boot image of;
#                     `hilbench flash` signs and writes it.
#   STM32N6_BAUD=115200    USART1's baud rate (default 921600; the kernel clock is HSI, 64 MHz)
#   N6_CLOCK=600|800|64    the CPU clock in MHz: 600 (VOS scale 1, the default), 800 (the SMPS
#                     overdrive, VOS scale 0), 64 (the reset clock tree, nothing changed)
#   N6_SERVE=wfi|poll      sleep (WFI) or busy-poll while no byte waits (poll: first contact)
#   N6_WATCHDOG_MS=N       the IWDG's timeout (default 32768; 0: off)
# Each option set builds in its own directory (build/stm32n6, build/stm32n6-800-poll, ...).
# docs/board.md. Included by device_fw/Makefile; variables prefixed N6_ to stay out of its way.
N6_CC       ?= arm-none-eabi-gcc
N6_OBJCOPY  ?= arm-none-eabi-objcopy
STM32N6_BAUD ?= 921600
N6_CLOCK    ?= 600
N6_SERVE    ?= wfi
N6_WATCHDOG_MS ?= 32768
ifeq ($(filter $(N6_CLOCK),600 800 64),)
$(error N6_CLOCK=$(N6_CLOCK) is not a clock this port sets: say N6_CLOCK=600, 800 or 64)
endif
ifeq ($(filter $(N6_SERVE),wfi poll),)
$(error N6_SERVE=$(N6_SERVE) is not a serving mode: say N6_SERVE=wfi or N6_SERVE=poll)
endif
N6_VARIANT  := $(if $(filter 600,$(N6_CLOCK)),,-$(N6_CLOCK))$(if $(filter poll,$(N6_SERVE)),-poll,)
N6_DIR      := $(BUILD)/stm32n6$(N6_VARIANT)
N6_SERVE_FLAGS := $(if $(filter poll,$(N6_SERVE)),-DHB_SERVE_POLL,)
N6_ARCH     := -mcpu=cortex-m55 -mthumb -mfloat-abi=hard
N6_OPT      ?= -O2 -g
N6_FLAGS     = $(CSTD) $(WARN) $(N6_OPT) $(N6_ARCH) $(INC) -Iport -Iport/stm32n6 -Iport/cortex_m \
               -ffunction-sections -fdata-sections -DSTM32N6_BAUD=$(STM32N6_BAUD)u \
               -DHB_N6_CLOCK_MHZ=$(N6_CLOCK) -DHB_N6_WATCHDOG_MS=$(N6_WATCHDOG_MS) \
               $(N6_SERVE_FLAGS) $(EXTRA_CFLAGS)
N6_LD       := -nostartfiles -Wl,--gc-sections -Wl,--no-warn-rwx-segments -Wl,--build-id=sha1 \
               -Wl,--nmagic \
               -Lport/stm32n6 -Lcore/gen -Tstm32n6.ld
# with what the Cortex-M55 ports share (port/cortex_m: CM_SRC, CM_HDRS of device_fw/Makefile)
N6_PORT     := $(sort $(wildcard port/stm32n6/*.c)) $(CM_SRC)
N6_LDS      := port/stm32n6/stm32n6.ld core/gen/hb_stm32n6_memory.ld
N6_HDRS     := $(HEADERS) $(CM_HDRS) port/port.h $(wildcard port/stm32n6/*.h) $(N6_LDS) \
               port/stm32n6/port.mk
N6_OBJ      := $(patsubst %.c,$(N6_DIR)/obj/%.o,$(CORE_SRC) $(N6_PORT))

.PHONY: stm32n6 stm32n6-flash
stm32n6: $(N6_DIR)/hilbench-stm32n6.elf
stm32n6-flash: $(N6_DIR)/hilbench-stm32n6-flash.bin

$(N6_DIR)/flags: FORCE
	@mkdir -p $(@D)
	@echo '$(N6_FLAGS)' | cmp -s - $@ || echo '$(N6_FLAGS)' > $@

$(N6_DIR)/obj/%.o: %.c $(N6_HDRS) $(N6_DIR)/flags
	@mkdir -p $(@D)
	$(N6_CC) $(N6_FLAGS) -c -o $@ $<

$(N6_DIR)/hilbench-stm32n6.elf: $(N6_OBJ) $(N6_LDS)
	$(N6_CC) $(N6_ARCH) $(N6_LD) --specs=nano.specs -Wl,-Map=$(N6_DIR)/hilbench-stm32n6.map \
	  -o $@ $(N6_OBJ)

# flash boot: the same objects, the linker script's other placement (HB_N6_FLASH_BOOT)
$(N6_DIR)/hilbench-stm32n6-flash.elf: $(N6_OBJ) $(N6_LDS)
	$(N6_CC) $(N6_ARCH) $(N6_LD) -Wl,--defsym=HB_N6_FLASH_BOOT=1 --specs=nano.specs \
	  -Wl,-Map=$(N6_DIR)/hilbench-stm32n6-flash.map -o $@ $(N6_OBJ)

$(N6_DIR)/hilbench-stm32n6-flash.bin: $(N6_DIR)/hilbench-stm32n6-flash.elf
	$(N6_OBJCOPY) -O binary $< $@

# ---- the bring-up's host test (port/stm32n6/test/): bringup.c, uart.c and cortex_m/cache.c
# built for the host with -DHB_MMIO_RECORD against the recording register file (a STAND-IN
# for the chip), with the sanitizers; `make test` runs it (docs/board.md "What is tested")
N6T_DIR     := $(BUILD)/n6test
N6T_SRC     := port/stm32n6/test/test_n6_bringup.c port/stm32n6/test/mmio_record.c \
               port/stm32n6/bringup.c port/stm32n6/uart.c port/cortex_m/cache.c
N6T_HDRS    := $(wildcard port/stm32n6/test/*.h port/stm32n6/*.h port/cortex_m/*.h) port/port.h

.PHONY: n6-test
n6-test: $(N6T_DIR)/test_n6_bringup
	@echo "== $<"; $<

$(N6T_DIR)/test_n6_bringup: $(N6T_SRC) $(N6T_HDRS) port/stm32n6/port.mk
	@mkdir -p $(@D)
	$(CC) $(CSTD) $(WARN) $(OPT) $(SANFLAGS) -DHB_MMIO_RECORD -Iport -Iport/stm32n6 \
	  -Iport/cortex_m -Iport/stm32n6/test -o $@ $(N6T_SRC)

test: n6-test
