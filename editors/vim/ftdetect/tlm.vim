" tlm model descriptions
autocmd BufRead,BufNewFile *.tlm setfiletype tlm
